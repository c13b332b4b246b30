package agent

import (
	"os/exec"
	"testing"
)

func TestProcessOf_Alive(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	p, err := processOf(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if p.StartTime == 0 || p.BootID == "" {
		t.Errorf("processOf = %+v, want a start time and a boot ID", p)
	}
	if !alive(p) {
		t.Errorf("alive(%+v) = false for a running process", p)
	}
	reused := p
	reused.StartTime++
	if alive(reused) {
		t.Error("alive = true for the same pid with another start time (a reused pid)")
	}
	otherBoot := p
	otherBoot.BootID = "another-boot"
	if alive(otherBoot) {
		t.Error("alive = true for a process recorded in another boot")
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait() // reaped: the pid is gone
	if alive(p) {
		t.Errorf("alive(%+v) = true after the process was killed and reaped", p)
	}
	if _, err := processOf(cmd.Process.Pid); err == nil {
		t.Error("processOf succeeded for a reaped pid")
	}
}
