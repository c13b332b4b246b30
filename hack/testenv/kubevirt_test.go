package testenv_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodevirt/nodevirt/hack/testenv"
)

func TestKubeVirtExamples_HasVMCirros(t *testing.T) {
	dir := testenv.KubeVirtExamples(t)
	if !strings.Contains(filepath.ToSlash(dir), "/kubevirt.io/kubevirt@v1.6.0/") {
		t.Errorf("examples dir %s is not kubevirt.io/kubevirt@v1.6.0's in the module cache", dir)
	}
	data, err := os.ReadFile(filepath.Join(dir, "vm-cirros.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "kind: VirtualMachine") {
		t.Errorf("vm-cirros.yaml holds no VirtualMachine:\n%s", data)
	}
}

func TestVirtctl_ClientVersion(t *testing.T) {
	out, err := exec.Command(testenv.Virtctl(t), "version", "--client").CombinedOutput()
	if err != nil {
		t.Fatalf("virtctl version --client: %v\n%s", err, out)
	}
	for _, want := range []string{`GitVersion:"v1.6.0"`, `GitCommit:"d53baa7f84687d156bd8a3a80d7ea2fbd8e0a993"`, `GitTreeState:"clean"`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("virtctl version --client lacks %s:\n%s", want, out)
		}
	}
}
