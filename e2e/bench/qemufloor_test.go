package main

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/nodevirt/nodevirt/hack/testenv"
)

func TestQEMUStartFloor(t *testing.T) {
	_, err := exec.LookPath("qemu-system-x86_64")
	testenv.Require(t, err == nil, "qemu-system-x86_64", "guest-deps")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cpu, err := qemuStartFloor(ctx, 6)
	if err != nil {
		t.Fatal(err)
	}
	if len(cpu) != 6 {
		t.Fatalf("got %d figures, want 6", len(cpu))
	}
	t.Logf("bare QEMU start CPU times: %v", cpu)
	for i, d := range cpu {
		// A QEMU that built a q35 machine used some CPU, and a paused
		// one far less than its 30 s bound.
		if d <= 0 || d > 10*time.Second {
			t.Errorf("start %d: CPU time %v, want more than 0 and well under 10 s", i, d)
		}
	}
}
