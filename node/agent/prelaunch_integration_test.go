package agent_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/node/api"
)

// testPrelaunch: a VMI the controller has not scheduled yet (phase
// Scheduling, no node label) whose launcher runs on the node is started by
// the real agent before Scheduled: its guest boots, and the VMI stays as
// the controller left it. Once scheduled it is Running at the agent's
// next sync, without a second launch.
func testPrelaunch(t *testing.T, h *harness) {
	v := h.prepareVM(t, "early", vmOpts{binding: "masquerade", unscheduled: true, grace: 3})
	v.waitSerial(t, "NODEVIRT-GUEST-READY", 90*time.Second)
	got := v.get()
	switch {
	case got == nil:
		t.Fatal("VMI gone")
	case got.Status.Phase != v1.Scheduling || len(got.Status.Conditions) != 0 || len(got.Status.Interfaces) != 0 || len(got.Finalizers) != 0:
		t.Errorf("VMI written before Scheduled: phase %q, conditions %v, interfaces %v, finalizers %v; want the controller's Scheduling only",
			got.Status.Phase, got.Status.Conditions, got.Status.Interfaces, got.Finalizers)
	}

	v.vmi = got
	v.schedule(t)
	scheduled := time.Now()
	got = v.waitPhase(t, v1.Running, 30*time.Second)
	t.Logf("VM %s: Scheduled → Running %v (QEMU ran before Scheduled)", v.name, time.Since(scheduled).Round(time.Millisecond))
	wantCond(t, got, v1.VirtualMachineInstanceReady, corev1.ConditionTrue, "")
	tl, err := api.NewClient(h.apiSocket).Timeline(h.ctx, v.ref())
	if err != nil {
		t.Fatal(err)
	}
	launches := 0
	for _, e := range tl {
		if e.Reason == "Launching" {
			launches++
		}
	}
	if launches != 1 {
		t.Errorf("VM %s launched %d times, want once", v.name, launches)
	}
	// Gone before the subtest ends, which kills its launcher.
	v.deleteAndWatch(t, 30*time.Second)
}
