package subresources

import (
	"net/http"
	"strings"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/endpoints"
)

// discoveryResources are the names virt-api lists for each version of the
// group (resources without verbs: kubectl and the aggregator only need to
// know the group exists). nodevirt lists the same names so that RBAC
// tooling sees the same group; those it does not serve (volumes,
// objectgraph, SEV) answer 404. virt-api's misspelt
// "virtualmachinesinstances/objectgraph" is listed under its correct name.
var discoveryResources = []string{
	"expand-vm-spec",
	"virtualmachineinstances/vnc",
	"virtualmachineinstances/console",
	"virtualmachineinstances/portforward",
	"virtualmachineinstances/pause",
	"virtualmachineinstances/unpause",
	"virtualmachineinstances/freeze",
	"virtualmachineinstances/unfreeze",
	"virtualmachineinstances/reset",
	"virtualmachineinstances/softreboot",
	"virtualmachines/start",
	"virtualmachines/stop",
	"virtualmachines/restart",
	"virtualmachines/migrate",
	"virtualmachines/expand-spec",
	"virtualmachines/objectgraph",
	"virtualmachineinstances/guestosinfo",
	"virtualmachineinstances/userlist",
	"virtualmachineinstances/filesystemlist",
	"virtualmachineinstances/addvolume",
	"virtualmachineinstances/removevolume",
	"virtualmachineinstances/objectgraph",
	"virtualmachineinstances/sev/fetchcertchain",
	"virtualmachineinstances/sev/querylaunchmeasurement",
	"virtualmachineinstances/sev/setupsession",
	"virtualmachineinstances/sev/injectlaunchsecret",
}

// APIResources is the APIResourceList content of one version.
func APIResources() []metav1.APIResource {
	out := make([]metav1.APIResource, 0, len(discoveryResources))
	for _, n := range discoveryResources {
		out = append(out, metav1.APIResource{Name: n, Namespaced: true, Verbs: metav1.Verbs{}})
	}
	return out
}

// APIGroup is the group's discovery document (/apis/subresources.kubevirt.io).
func APIGroup() metav1.APIGroup {
	g := metav1.APIGroup{TypeMeta: metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}, Name: Group}
	for _, v := range Versions {
		g.Versions = append(g.Versions, metav1.GroupVersionForDiscovery{GroupVersion: Group + "/" + v, Version: v})
	}
	g.PreferredVersion = g.Versions[0]
	return g
}

// AggregatedVersions is the group in aggregated discovery form (what the
// aggregator would derive from APIResources), preferred version first.
func AggregatedVersions() ([]apidiscoveryv2.APIVersionDiscovery, error) {
	res, err := endpoints.ConvertGroupVersionIntoToDiscovery(APIResources())
	if err != nil {
		return nil, err
	}
	var out []apidiscoveryv2.APIVersionDiscovery
	for _, v := range Versions {
		out = append(out, apidiscoveryv2.APIVersionDiscovery{Version: v, Resources: res, Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent})
	}
	return out, nil
}

func (h *Handler) resourceList(base string) http.HandlerFunc {
	gv := strings.TrimPrefix(base, "/apis/")
	return func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, &metav1.APIResourceList{
			TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
			GroupVersion: gv,
			APIResources: APIResources(),
		})
	}
}

// groupHandler serves the APIGroup document.
func groupHandler(w http.ResponseWriter, _ *http.Request) {
	g := APIGroup()
	writeJSON(w, http.StatusOK, &g)
}
