package operator

// Component is one part of nodevirt the operator installs: its manifest
// file (a multi-document YAML rendered from deploy/<Name> when the
// operator's image is built) in the manifests directory.
type Component struct {
	Name string
	// Keep: the component's objects stay when the KubeVirt resource is
	// deleted (the CRDs, as KubeVirt's operator keeps them, and with them
	// every VM).
	Keep bool
}

// File is the component's manifest file name.
func (c Component) File() string { return c.Name + ".yaml" }

// Components are installed in this order and removed in the reverse one.
// A new component joins nodevirt by one entry here and its directory under
// deploy/ (make operator-manifests renders each).
var Components = []Component{
	{Name: "crds", Keep: true},
	{Name: "rbac"},
	{Name: "admission"},
	{Name: "controller"},
	{Name: "agent"},
	{Name: "api"},
}
