package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
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

// spinComm is the command name of TestCPUMeter's shells: the meter
// counts by command name across the host, and other tests running
// beside this one start shells of their own.
const spinComm = "nvcpumeterspin"

// TestCPUMeter burns CPU in processes that start and end inside the
// window (a shell and the two shells it runs and waits for) and checks
// that the meter counted their CPU time once: the time the kernel gives
// for the outer shell and everything it waited for.
func TestCPUMeter(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	shell, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	// The kernel names a process after the path it was started by, so
	// the shells run through a link of their own name.
	spinner := filepath.Join(t.TempDir(), spinComm)
	if err := os.Symlink(shell, spinner); err != nil {
		t.Fatal(err)
	}
	before := selfCPU(t)
	m := startCPUMeter(true)
	const spin = `i=0; while [ $i -lt 150000 ]; do i=$((i+1)); done`
	cmd := exec.Command(spinner, "-c", spin+`; "$0" -c '`+spin+`'; "$0" -c '`+spin+`'`, spinner)
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	spun := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	// Samples after the shells ended; with the first and the last, the
	// window holds at least four readings of /proc.
	time.Sleep(2*cpuSampleEvery + cpuSampleEvery/2)
	u := m.Stop()
	// The shells' time lands on spinComm while they run and on this test
	// (which reaped the outer one) for the share no sample saw. The
	// test's own threads, the meter's reading of /proc among them, are
	// counted as well: the kernel's figure for them over a span that
	// holds the window is taken back.
	own := selfCPU(t) - before
	self, err := os.ReadFile("/proc/self/comm")
	if err != nil {
		t.Fatal(err)
	}
	ours := u.byComm[spinComm] + u.byComm[strings.TrimSpace(string(self))] - own
	t.Logf("counted %v for the shells and this test, less the test's own %v; the kernel gives %v for the shells", ours+own, own, spun)
	// /proc counts in 10 ms ticks, and each of the four processes' times
	// is cut to a tick at each of its samples. The meter's first and last
	// reading of /proc fall partly outside its window but inside the
	// span taken back: with at least four readings, under half of own.
	if ours < spun-80*time.Millisecond-own/2 || ours > spun+80*time.Millisecond {
		t.Errorf("counted %v for the shells, want the %v the kernel gives for them", ours, spun)
	}
	if s := u.String(); !strings.Contains(s, "other") {
		t.Errorf("String() = %q, want the shells' component", s)
	}
	if (startCPUMeter(false)).Stop().total() != 0 {
		t.Error("an off meter counted CPU")
	}
}

// selfCPU is the CPU time every thread of this process has used, as the
// kernel keeps it (getrusage), not in /proc's ticks.
func selfCPU(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
