package localcluster

import (
	"os/exec"
	"syscall"
	"testing"
	"time"
)

func TestProcessAlive(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if !ProcessAlive(pid) {
		t.Fatalf("ProcessAlive(%d) = false for a running process", pid)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil { // our child, by its pid
		t.Fatal(err)
	}
	// Not reaped yet: a zombie, which counts as gone.
	deadline := time.Now().Add(5 * time.Second)
	for ProcessAlive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("ProcessAlive(%d) still true 5 s after SIGKILL (a zombie counts as gone)", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = cmd.Wait()
	if ProcessAlive(pid) {
		t.Errorf("ProcessAlive(%d) = true after the process was reaped", pid)
	}
}
