package cpupin_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nodevirt/nodevirt/hack/testenv"
	"github.com/nodevirt/nodevirt/hack/testenv/bareqemu"
	"github.com/nodevirt/nodevirt/node/cpupin"
	"github.com/nodevirt/nodevirt/qmp"
)

// TestApply_RealQEMU pins a real QEMU's vCPU threads (listed by
// query-cpus-fast) and its other threads, then reads every thread's
// affinity back from /proc.
func TestApply_RealQEMU(t *testing.T) {
	_, err := exec.LookPath("qemu-system-x86_64")
	testenv.Require(t, err == nil, "qemu-system-x86_64", "guest-deps")
	host := cpupin.Host{}
	allowed, err := host.Allowed(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if len(allowed) < 2 {
		t.Fatalf("this test needs 2 CPUs in its cpuset, has %v", allowed)
	}

	for _, tc := range []struct {
		name    string
		smp     int
		isolate bool
	}{
		{name: "TwoVCPUsSharedEmulator", smp: 2},
		{name: "OneVCPUIsolatedEmulator", smp: 1, isolate: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pid, conn := startQEMU(t, tc.smp)
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			cpus, err := conn.QueryCPUsFast(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var vcpus []int
			for _, c := range cpus {
				vcpus = append(vcpus, c.ThreadID)
			}
			threads, err := host.Threads(pid)
			if err != nil {
				t.Fatal(err)
			}
			var others []int
			for _, tid := range threads {
				if !slices.Contains(vcpus, tid) {
					others = append(others, tid)
				}
			}
			cpuset, err := host.Allowed(pid)
			if err != nil {
				t.Fatal(err)
			}
			pins, err := cpupin.Plan(vcpus, others, cpuset, tc.isolate)
			if err != nil {
				t.Fatal(err)
			}
			if err := cpupin.Apply(pins); err != nil {
				t.Fatal(err)
			}
			for _, p := range pins {
				if diff := cmp.Diff(p.CPUs, affinity(t, pid, p.TID)); diff != "" {
					t.Errorf("thread %d affinity (-planned +actual):\n%s", p.TID, diff)
				}
			}
			if got := affinity(t, pid, vcpus[0]); got[0] != cpuset[0] {
				t.Errorf("vCPU 0 runs on %v, want %d", got, cpuset[0])
			}
			if tc.isolate {
				if got := affinity(t, pid, pid); !cmp.Equal(got, []int{cpuset[tc.smp]}) {
					t.Errorf("emulator thread runs on %v, want [%d] alone", got, cpuset[tc.smp])
				}
			}
			// The cgroup's cpuset, not the pinned main thread's mask, is
			// what a second plan starts from.
			again, err := host.Allowed(pid)
			if err != nil || !cmp.Equal(again, cpuset) {
				t.Errorf("Allowed after pinning = %v, %v; want %v", again, err, cpuset)
			}
		})
	}
}

// affinity reads a thread's Cpus_allowed_list.
func affinity(t *testing.T, pid, tid int) []int {
	t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/status", pid, tid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			cpus, err := cpupin.ParseList(v)
			if err != nil {
				t.Fatal(err)
			}
			return cpus
		}
	}
	t.Fatalf("thread %d: no Cpus_allowed_list", tid)
	return nil
}

// startQEMU starts a guestless QEMU (stopped at reset, -S) with smp vCPUs
// under multi-threaded TCG, so each vCPU has a thread of its own.
func startQEMU(t *testing.T, smp int) (int, *qmp.Conn) {
	t.Helper()
	return bareqemu.Start(t, "-accel", "tcg,thread=multi", "-machine", "q35", "-m", "64",
		"-smp", fmt.Sprint(smp), "-nodefaults", "-S")
}
