package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodevirt/nodevirt/hack/testenv"
)

// The repository's deploy/local becomes customizeComponents patches with
// the deploy-time values filled in and the launcher image left to the
// operator.
func TestLocalKubeVirt(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	kv, err := LocalKubeVirt(filepath.Join(root, "deploy", "local"), "/srv/cluster", "Containers", "nodevirt")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, p := range kv.Spec.CustomizeComponents.Patches {
		got[p.ResourceType+"/"+p.ResourceName] = p.Patch
		if strings.Contains(p.Patch, clusterDirPlaceholder) || strings.Contains(p.Patch, podShapePlaceholder) {
			t.Errorf("%s/%s: a placeholder is left: %s", p.ResourceType, p.ResourceName, p.Patch)
		}
	}
	if ds := got["DaemonSet/nodevirt-agent"]; !strings.Contains(ds, `"path":"/srv/cluster/nodes"`) {
		t.Errorf("agent DaemonSet patch: %s, want the cluster's nodes directory", ds)
	}
	cm := got["ConfigMap/nodevirt-config"]
	if !strings.Contains(cm, `"launcherPodShape":"Containers"`) || strings.Contains(cm, "launcherImage") {
		t.Errorf("controller ConfigMap patch: %s, want the pod shape and no launcherImage", cm)
	}
	if kv.Namespace != "nodevirt" || kv.Name != "kubevirt" || kv.Kind != "KubeVirt" {
		t.Errorf("KubeVirt %s %s/%s", kv.Kind, kv.Namespace, kv.Name)
	}
	for _, bad := range []struct{ dir, shape string }{{"relative/dir", "Auto"}, {"/srv/cluster", "Fast"}} {
		if _, err := LocalKubeVirt(filepath.Join(root, "deploy", "local"), bad.dir, bad.shape, "nodevirt"); err == nil {
			t.Errorf("cluster dir %q, shape %q: want an error", bad.dir, bad.shape)
		}
	}
}
