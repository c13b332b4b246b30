package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func TestComponent(t *testing.T) {
	for comm, want := range map[string]string{
		"kube-apiserver":  "kube-apiserver",
		"containerd-shim": "containerd shims, runc",
		"runc:[2:INIT]":   "containerd shims, runc",
		"kube-controller": "scheduler, controller-manager, kube-proxy",
		"nodevirt-launch": "nodevirt launchers",
		"nodevirt-contro": "nodevirt controller",
		"nodevirt-api":    "nodevirt API server, operator, device plugin",
		"qemu-system-x86": "QEMU",
		"host-local":      "CNI plugins",
		"sh":              "other",
	} {
		if got := component(comm); got != want {
			t.Errorf("component(%q) = %q, want %q", comm, got, want)
		}
	}
}

// TestCPUMeter burns CPU in processes that start and end inside the
// window (a shell and the two shells it runs and waits for) and checks
// that the meter counted their CPU time once: the time the kernel gives
// for the outer shell and everything it waited for.
func TestCPUMeter(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	m := startCPUMeter(true)
	const spin = `i=0; while [ $i -lt 150000 ]; do i=$((i+1)); done`
	cmd := exec.Command("sh", "-c", spin+"; sh -c '"+spin+"'; sh -c '"+spin+"'")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	spun := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	time.Sleep(cpuSampleEvery + cpuSampleEvery/2) // a sample after the shells ended
	u := m.Stop()
	// The shells' time lands on "sh" while they run and on this test
	// (which reaped the outer one) for the share no sample saw; the
	// test's own reading of /proc adds a little.
	self, err := os.ReadFile("/proc/self/comm")
	if err != nil {
		t.Fatal(err)
	}
	ours := u.byComm["sh"] + u.byComm[strings.TrimSpace(string(self))]
	t.Logf("counted %v for the shells and this test; the kernel gives %v for the shells", ours, spun)
	if ours < spun-50*time.Millisecond || ours > spun+300*time.Millisecond {
		t.Errorf("counted %v for the shells and this test, want the %v the kernel gives for the shells", ours, spun)
	}
	if s := u.String(); !strings.Contains(s, "other") {
		t.Errorf("String() = %q, want the shells' component", s)
	}
	if (startCPUMeter(false)).Stop().total() != 0 {
		t.Error("an off meter counted CPU")
	}
}
