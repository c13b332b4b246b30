package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nodevirt/nodevirt/hack/testenv"
)

func TestQEMUStartFloor(t *testing.T) {
	_, err := exec.LookPath("qemu-system-x86_64")
	testenv.Require(t, err == nil, "qemu-system-x86_64", "guest-deps")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, hold := range []bool{true, false} {
		var before []int
		if hold {
			before = childPIDs(t)
		}
		cpu, err := qemuStartFloor(ctx, 6, hold)
		if err != nil {
			t.Fatal(err)
		}
		if len(cpu) != 6 {
			t.Fatalf("hold %v: got %d figures, want 6", hold, len(cpu))
		}
		t.Logf("bare QEMU start CPU times, hold %v: %v", hold, cpu)
		for i, d := range cpu {
			// A QEMU that built a q35 machine used some CPU, and a paused
			// one far less than its 30 s bound.
			if d <= 0 || d > 10*time.Second {
				t.Errorf("hold %v, start %d: CPU time %v, want more than 0 and well under 10 s", hold, i, d)
			}
		}
		if hold {
			// Every held QEMU was quit and reaped.
			if after := childPIDs(t); !slices.Equal(after, before) {
				t.Errorf("child processes after the held starts: %v, before: %v", after, before)
			}
		}
	}
}

// childPIDs are this process's children (/proc/self/task/*/children).
func childPIDs(t *testing.T) []int {
	t.Helper()
	files, err := filepath.Glob("/proc/self/task/*/children")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // the thread ended
		}
		for _, field := range strings.Fields(string(b)) {
			pid, err := strconv.Atoi(field)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			pids = append(pids, pid)
		}
	}
	slices.Sort(pids)
	return pids
}
