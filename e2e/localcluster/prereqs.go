package localcluster

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/nodevirt/nodevirt/hack/testenv"
)

// Prereq is something a test on the local cluster needs and the make
// target that provides it.
type Prereq struct {
	What   string
	Target string
}

// MissingPrereqs lists what is missing on this host for tests that bring
// up the local cluster and deploy nodevirt on it: root, the Kubernetes
// and containerd binaries, nodevirt's and the test guest's images, runc.
func MissingPrereqs() ([]Prereq, error) {
	var missing []Prereq
	if os.Geteuid() != 0 {
		missing = append(missing, Prereq{"root (the local cluster)", "test-e2e` as root, e.g. `sudo make test-e2e"})
	}
	out, err := OutDir()
	if err != nil {
		return nil, err
	}
	for _, f := range []Prereq{
		{filepath.Join(out, "k8s", "bin", "kubelet"), "cluster-binaries"},
		{filepath.Join(out, "containerd", "bin", "containerd"), "cluster-binaries"},
		{filepath.Join(out, "containerd", "bin", "containerd-shim-runc-v2"), "cluster-binaries"},
		{filepath.Join(out, "k8s", "bin", "kubectl"), "cluster-binaries"},
		{filepath.Join(out, "images", "nodevirt-agent.tar"), "images"},
		{filepath.Join(out, "images", "nodevirt-controller.tar"), "images"},
		{filepath.Join(out, "images", "nodevirt-launcher.tar"), "images"},
		{filepath.Join(out, "images", "guest-kernel.tar"), "images"},
		{filepath.Join(out, "images", "guest-disk.tar"), "images"},
	} {
		if _, err := os.Stat(f.What); err != nil {
			missing = append(missing, f)
		}
	}
	// containerd is built pinned (hack/build-containerd.sh); runc and the
	// CNI plugins come from Debian.
	if _, err := exec.LookPath("runc"); err != nil {
		missing = append(missing, Prereq{"runc", "cluster-packages"})
	}
	return missing, nil
}

// RequirePrereqs gates t on what MissingPrereqs lists, through
// testenv.Require: skipped in -short mode, skipped locally naming the make
// target that provides the first missing piece, failed under CI=true.
func RequirePrereqs(t testing.TB) {
	t.Helper()
	testenv.Require(t, true, "the local cluster (root, Kubernetes binaries, images, containerd)", "test-e2e")
	missing, err := MissingPrereqs()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range missing {
		testenv.Require(t, false, m.What, m.Target)
	}
}
