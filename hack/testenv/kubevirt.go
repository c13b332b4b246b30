package testenv

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// virtctlModule is the module that pins KubeVirt's release, relative to the
// repository root (its go.mod says why it is a module of its own).
const virtctlModule = "hack/tools/virtctl"

// Virtctl returns the path of KubeVirt's virtctl, built from the pinned
// module hack/tools/virtctl into $NODEVIRT_OUT/bin/virtctl. When the binary
// is missing it runs `make virtctl` (a cold build takes minutes), and it is
// gated like Require: skipped in -short mode; a failed build fails the test
// under CI=true and skips it otherwise. An existing binary is used as it
// is: `make virtctl` (part of `make test`) rebuilds it when the pin moves.
func Virtctl(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("skipped in -short mode: needs KubeVirt's virtctl (run `make virtctl`)")
	}
	out, err := OutDir()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(out, "bin", "virtctl")
	if _, err := os.Stat(path); err == nil {
		return path
	}
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("building %s with `make virtctl` (a cold build takes minutes)", path)
	cmd := exec.Command("make", "--no-print-directory", "-C", root, "virtctl", "OUT="+out)
	output, err := cmd.CombinedOutput()
	if err == nil {
		_, err = os.Stat(path)
	}
	if err != nil {
		Require(t, false, fmt.Sprintf("virtctl: make virtctl: %v\n%s", err, tail(output, 40)), "virtctl")
	}
	return path
}

// KubeVirtExamples returns the examples/ directory of the kubevirt.io/kubevirt
// release hack/tools/virtctl pins, in the Go module cache (read-only; never
// copy it into the repository). It runs `go mod download` in that module,
// which is instant once the module is cached (`make virtctl` caches it);
// when that fails (no network, no go command) the test fails under CI=true
// and is skipped otherwise, and in -short mode it is skipped.
func KubeVirtExamples(t testing.TB) string {
	t.Helper()
	dir, err := kubeVirtModuleDir()
	if err == nil {
		dir = filepath.Join(dir, "examples")
		_, err = os.Stat(dir)
	}
	if err != nil {
		Require(t, false, "KubeVirt's examples: "+err.Error(), "virtctl")
	}
	return dir
}

// kubeVirtModuleDir downloads (if need be) the pinned kubevirt.io/kubevirt
// module and returns its directory in the module cache.
func kubeVirtModuleDir() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.Command("go", "mod", "download", "-json", "kubevirt.io/kubevirt")
	cmd.Dir = filepath.Join(root, virtctlModule)
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	output, err := cmd.Output()
	var mod struct {
		Version, Dir, Error string
	}
	if jerr := json.Unmarshal(output, &mod); jerr == nil && mod.Error != "" {
		return "", fmt.Errorf("go mod download kubevirt.io/kubevirt in %s: %s", virtctlModule, mod.Error)
	}
	if err != nil {
		return "", fmt.Errorf("go mod download kubevirt.io/kubevirt in %s: %w: %s", virtctlModule, err, stderr.String())
	}
	if mod.Dir == "" {
		return "", fmt.Errorf("go mod download kubevirt.io/kubevirt in %s: no directory in %q", virtctlModule, output)
	}
	return mod.Dir, nil
}

// tail returns the last n lines of b.
func tail(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
