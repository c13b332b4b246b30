// Command localkubevirt prints the KubeVirt resource that installs nodevirt
// on the local cluster (make cluster-up) through nodevirt-operator: the
// local differences are deploy/local's patches (the agent's host paths
// under the cluster's state directory, its 5 s heartbeat, one nodevirt-api
// replica, the launcher pod shape), carried as the resource's
// spec.customizeComponents with the two deploy-time values filled in.
// Images need no patch: the operator takes the registry and tag of its own
// image (nodevirt.local/…:dev, deploy/local/operator).
//
//	localkubevirt -cluster-dir DIR -pod-shape ImageVolumes|Containers|Auto
//
// hack/deploy-local.sh applies its output.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// The placeholders deploy/local's patches carry for the deploy-time values.
const (
	clusterDirPlaceholder = "/CLUSTER_DIR"
	podShapePlaceholder   = "LAUNCHER_POD_SHAPE"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "localkubevirt:", err)
		os.Exit(2)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("localkubevirt", flag.ContinueOnError)
	local := fs.String("local", "deploy/local", "the local overlay whose patches to carry")
	clusterDir := fs.String("cluster-dir", "", "the local cluster's state directory (absolute)")
	shape := fs.String("pod-shape", "", "launcher pod shape: ImageVolumes, Containers or Auto")
	ns := fs.String("namespace", "nodevirt", "the KubeVirt's namespace (the operator's)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	kv, err := LocalKubeVirt(*local, *clusterDir, *shape, *ns)
	if err != nil {
		return err
	}
	// Only what the resource sets: no empty configuration or status.
	b, err := json.Marshal(kv)
	if err != nil {
		return err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	delete(m, "status")
	if spec, ok := m["spec"].(map[string]any); ok {
		if c, ok := spec["configuration"].(map[string]any); ok && len(c) == 0 {
			delete(spec, "configuration")
		}
	}
	out, err := yaml.Marshal(m)
	if err != nil {
		return err
	}
	_, err = os.Stdout.Write(out)
	return err
}

// LocalKubeVirt builds the local cluster's KubeVirt from the patches of
// the kustomization in dir. The controller's launcherImage is left to the
// operator: it follows the installed version.
func LocalKubeVirt(dir, clusterDir, shape, ns string) (*v1.KubeVirt, error) {
	if !filepath.IsAbs(clusterDir) {
		return nil, fmt.Errorf("-cluster-dir %q: want an absolute path", clusterDir)
	}
	switch shape {
	case "ImageVolumes", "Containers", "Auto":
	default:
		return nil, fmt.Errorf("-pod-shape %q: want ImageVolumes, Containers or Auto", shape)
	}
	var k struct {
		Patches []struct {
			Path string `json:"path"`
		} `json:"patches"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		return nil, err
	}
	if err := yaml.Unmarshal(b, &k); err != nil {
		return nil, fmt.Errorf("%s/kustomization.yaml: %w", dir, err)
	}
	if len(k.Patches) == 0 {
		return nil, fmt.Errorf("%s/kustomization.yaml has no patches", dir)
	}
	kv := &v1.KubeVirt{
		TypeMeta:   metav1.TypeMeta{APIVersion: "kubevirt.io/v1", Kind: "KubeVirt"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kubevirt"},
	}
	for _, p := range k.Patches {
		b, err := os.ReadFile(filepath.Join(dir, p.Path))
		if err != nil {
			return nil, err
		}
		s := strings.ReplaceAll(string(b), clusterDirPlaceholder, filepath.Clean(clusterDir))
		s = strings.ReplaceAll(s, podShapePlaceholder, shape)
		var m map[string]any
		if err := yaml.Unmarshal([]byte(s), &m); err != nil {
			return nil, fmt.Errorf("%s: %w", p.Path, err)
		}
		kind, _ := m["kind"].(string)
		md, _ := m["metadata"].(map[string]any)
		name, _ := md["name"].(string)
		if kind == "" || name == "" {
			return nil, fmt.Errorf("%s: a patch needs kind and metadata.name", p.Path)
		}
		if data, ok := m["data"].(map[string]any); ok {
			delete(data, "launcherImage")
		}
		patch, err := json.Marshal(m)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.Path, err)
		}
		kv.Spec.CustomizeComponents.Patches = append(kv.Spec.CustomizeComponents.Patches, v1.CustomizeComponentsPatch{
			ResourceType: kind, ResourceName: name, Type: v1.StrategicMergePatchType, Patch: string(patch)})
	}
	return kv, nil
}
