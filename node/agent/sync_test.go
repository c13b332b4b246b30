package agent_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/node/launcher"
)

var errInjected = errors.New("injected")

// TestSync_StartPersistsIntentBeforeEachEffect starts a VMI and checks
// the order of the effects and that, when each one is called, the store
// already holds what it acts on.
func TestSync_StartPersistsIntentBeforeEachEffect(t *testing.T) {
	e := newSyncEnv(t)
	e.log.OnCall(func(op string) {
		r, err := e.db.Get(t.Context(), syncUID)
		if err != nil {
			t.Errorf("%s: no record yet: %v", op, err)
			return
		}
		switch op {
		case "network.Ensure " + syncTap:
			if len(r.Interfaces) != 1 || r.Interfaces[0].Tap != syncTap || r.Interfaces[0].MAC == "" {
				t.Errorf("%s before the allocation was persisted: %+v", op, r.Interfaces)
			}
		case "launcher.Launch":
			if len(r.Spec) == 0 {
				t.Errorf("%s before the spec was persisted", op)
			}
		case "qmp.Dial":
			if r.PodUID != syncPodUID || r.Sockets.QMP == "" {
				t.Errorf("%s before the sockets were persisted: %+v", op, r.Sockets)
			}
		}
	})
	e.mustSync()
	if got := e.launcher.Specs(); len(got) != 1 {
		t.Fatalf("launched %d specs, want 1", len(got))
	}
	e.qemuStarts()
	e.mustSync()

	want := []string{"network.Ensure " + syncTap, "dhcp.Listen " + syncBridge, "launcher.Launch", "qmp.Dial"}
	if diff := cmp.Diff(want, e.log.Calls()); diff != "" {
		t.Errorf("effects (-want +got):\n%s", diff)
	}
	wantTL := []string{"Adopted", "NetworkAllocated", "Launching", "Attached", "PhaseRunning"}
	if diff := cmp.Diff(wantTL, e.timeline()); diff != "" {
		t.Errorf("timeline (-want +got):\n%s", diff)
	}
	r := e.record()
	if r.Process.PID != qemuPID || r.Process.StartTime != qemuStart {
		t.Errorf("record process = %+v, want pid %d start %d", r.Process, qemuPID, qemuStart)
	}
	if got := e.vmi().Status.Phase; got != v1.Running {
		t.Errorf("VMI phase = %q, want Running", got)
	}
	if r.Observed.Phase != string(v1.Running) {
		t.Errorf("record phase = %q, want Running", r.Observed.Phase)
	}
	if ns := e.net.NetNS(); len(ns) != 1 || ns[0] != "/proc/4242/ns/net" {
		t.Errorf("network ensured in %v, want the launcher's netns", ns)
	}
}

// TestSync_StartErrors injects a failure into each step of the start and
// checks that the sync fails, the later effects do not happen and the
// record keeps what was persisted before.
func TestSync_StartErrors(t *testing.T) {
	tests := []struct {
		name      string
		setup     func(e *syncEnv)
		wantCalls []string
		wantIs    error
		check     func(t *testing.T, e *syncEnv)
	}{
		{
			name:      "NetworkFailsNoLaunch",
			setup:     func(e *syncEnv) { e.log.FailOn("network.Ensure "+syncTap, errInjected) },
			wantCalls: []string{"network.Ensure " + syncTap},
			wantIs:    errInjected,
			check: func(t *testing.T, e *syncEnv) {
				r := e.record()
				if len(r.Interfaces) != 1 || len(r.Spec) != 0 {
					t.Errorf("record after a failed network: %d interfaces, spec %q; want the allocation and no spec", len(r.Interfaces), r.Spec)
				}
			},
		},
		{
			name:      "DHCPFailsNoLaunch",
			setup:     func(e *syncEnv) { e.log.FailOn("dhcp.Listen "+syncBridge, errInjected) },
			wantCalls: []string{"network.Ensure " + syncTap, "dhcp.Listen " + syncBridge},
			wantIs:    errInjected,
		},
		{
			name: "LauncherRunsAnotherSpec",
			setup: func(e *syncEnv) {
				e.log.FailOn("launcher.Launch", launcher.ErrConflict)
			},
			wantCalls: []string{"network.Ensure " + syncTap, "dhcp.Listen " + syncBridge, "launcher.Launch"},
			wantIs:    launcher.ErrConflict,
			check: func(t *testing.T, e *syncEnv) {
				if len(e.record().Spec) == 0 {
					t.Error("the spec is not persisted after a failed launch")
				}
			},
		},
		{
			name: "LauncherUnreachableNoNetwork",
			// The launcher does not answer (not up yet): the record is
			// created, nothing is built, the sync polls again.
			setup:     func(e *syncEnv) { e.launcher.Down() },
			wantCalls: nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newSyncEnv(t)
			tt.setup(e)
			err := e.sync()
			switch {
			case tt.wantIs != nil && !errors.Is(err, tt.wantIs):
				t.Errorf("sync error = %v, want %v", err, tt.wantIs)
			case tt.wantIs == nil && err != nil:
				t.Errorf("sync error = %v, want none", err)
			}
			if diff := cmp.Diff(tt.wantCalls, e.log.Calls()); diff != "" {
				t.Errorf("effects (-want +got):\n%s", diff)
			}
			if r := e.record(); r.UID != syncUID || r.PodUID != syncPodUID {
				t.Errorf("record = %+v, want the adopted record", r)
			}
			if got := e.apiActions(); len(got) != 0 {
				t.Errorf("API writes %v, want none", got)
			}
			if tt.check != nil {
				tt.check(t, e)
			}
		})
	}
}

// TestSync_AttachFailure: QEMU's QMP does not answer: the sync fails
// without a status patch, and the record keeps no process.
func TestSync_AttachFailure(t *testing.T) {
	e := newSyncEnv(t)
	e.mustSync()
	e.log.Reset()
	e.virt.ClearActions()
	e.procs.Start(qemuPID, qemuStart) // QEMU runs, but QMP refuses
	if err := e.sync(); err == nil {
		t.Fatal("sync succeeded with QMP refusing")
	}
	if diff := cmp.Diff([]string{"qmp.Dial"}, e.log.Calls()); diff != "" {
		t.Errorf("effects (-want +got):\n%s", diff)
	}
	if got := e.apiActions(); len(got) != 0 {
		t.Errorf("API writes %v, want none", got)
	}
	if r := e.record(); r.Process.PID != 0 {
		t.Errorf("record process = %+v after a failed attach", r.Process)
	}
}

// TestSync_DeleteShutsDownInOrder: power button (after the stop intent
// is persisted), quit at the deadline, release, record gone, final status,
// finalizer removed last.
func TestSync_DeleteShutsDownInOrder(t *testing.T) {
	e := newSyncEnv(t)
	e.start()
	e.log.OnCall(func(op string) {
		r, err := e.db.Get(t.Context(), syncUID)
		if err != nil {
			t.Errorf("%s: %v", op, err)
			return
		}
		switch op {
		case "qmp.SystemPowerdown", "qmp.Quit":
			if r.Intent.Stop == nil || r.Intent.Stop.Deadline.IsZero() {
				t.Errorf("%s before the stop intent was persisted", op)
			}
		case "network.Release " + syncTap:
			if r.IsGone() {
				t.Errorf("%s after the record was marked gone", op)
			}
		}
	})
	e.deleteVMI()
	e.mustSync() // power button
	r := e.record()
	if r.Intent.Stop == nil || !r.Intent.Stop.Deadline.Equal(e.clock().Add(5*time.Second)) {
		t.Fatalf("stop intent = %+v, want a deadline 5s from now", r.Intent.Stop)
	}
	e.mustSync() // within the grace period: nothing
	e.advance(6 * time.Second)
	e.mustSync() // quit
	e.qemuExits(launcher.Exit{Code: 0, Signal: ""})
	e.virt.ClearActions()
	e.mustSync() // release, gone, finalizer

	want := []string{"qmp.SystemPowerdown", "qmp.Quit", "network.Release " + syncTap}
	if diff := cmp.Diff(want, e.log.Calls()); diff != "" {
		t.Errorf("effects (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"patch/status", "patch"}, e.apiActions()); diff != "" {
		t.Errorf("API writes of the last sync (-want +got):\n%s", diff)
	}
	vmi := e.vmi()
	if slices.Contains(vmi.Finalizers, v1.VirtualMachineInstanceFinalizer) {
		t.Errorf("finalizer still there: %v", vmi.Finalizers)
	}
	r = e.record()
	if !r.IsGone() || r.Observed.Finished.IsZero() {
		t.Errorf("record gone %v, finished %v; want a released tombstone", r.IsGone(), r.Observed.Finished)
	}
	if !vmi.Status.Phase.IsFinal() || r.Observed.Phase != string(vmi.Status.Phase) {
		t.Errorf("tombstone phase %q, VMI phase %q; want the VMI's final phase", r.Observed.Phase, vmi.Status.Phase)
	}
}

// TestSync_PowerdownFailure: the power button fails: the sync fails, the
// stop intent stays, and the next sync does not press it again before
// the deadline.
func TestSync_PowerdownFailure(t *testing.T) {
	e := newSyncEnv(t)
	e.start()
	e.log.FailOn("qmp.SystemPowerdown", errInjected)
	e.deleteVMI()
	if err := e.sync(); !errors.Is(err, errInjected) {
		t.Fatalf("sync error = %v, want %v", err, errInjected)
	}
	if e.record().Intent.Stop == nil {
		t.Fatal("stop intent lost after a failed powerdown")
	}
	e.mustSync()
	if diff := cmp.Diff([]string{"qmp.SystemPowerdown"}, e.log.Calls()); diff != "" {
		t.Errorf("effects (-want +got):\n%s", diff)
	}
}

// TestSync_QEMUCrashFails: QEMU dies under a running VMI: the VMI is
// Failed, the network released, and the record says Failed.
func TestSync_QEMUCrashFails(t *testing.T) {
	e := newSyncEnv(t)
	e.start()
	e.qemuExits(launcher.Exit{Code: -1, Signal: "killed"})
	e.mustSync()
	if diff := cmp.Diff([]string{"network.Release " + syncTap}, e.log.Calls()); diff != "" {
		t.Errorf("effects (-want +got):\n%s", diff)
	}
	if got := e.vmi().Status.Phase; got != v1.Failed {
		t.Errorf("VMI phase = %q, want Failed", got)
	}
	r := e.record()
	if r.Observed.Phase != string(v1.Failed) || r.Observed.Finished.IsZero() || r.IsGone() {
		t.Errorf("record phase %q, finished %v, gone %v; want Failed, released, live", r.Observed.Phase, r.Observed.Finished, r.IsGone())
	}
}

// TestSync_RecordPhaseFollowsAPI reproduces the record that stayed
// Running under a Failed VMI: the record's phase must converge to the
// VMI's whatever happened to the sync that patched it.
func TestSync_RecordPhaseFollowsAPI(t *testing.T) {
	conflict := apierrors.NewConflict(schema.GroupResource{Group: "kubevirt.io", Resource: "virtualmachineinstances"}, syncVMI, errInjected)
	tests := []struct {
		name  string
		fault func(e *syncEnv)
	}{
		// The patch reached the API server but its answer was lost (or
		// the agent died right after it): the next sync sees Failed in
		// its cache and has nothing to patch.
		{"AnswerLost", func(e *syncEnv) { e.failStatusPatch(1, true, errInjected) }},
		// A stale cache: the patch conflicts, the next one succeeds.
		{"Conflict", func(e *syncEnv) { e.failStatusPatch(1, false, conflict) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newSyncEnv(t)
			e.start()
			e.qemuExits(launcher.Exit{Code: -1, Signal: "killed"})
			tt.fault(e)
			if err := e.sync(); err == nil {
				t.Fatal("sync succeeded with a failing status patch")
			}
			for range 2 {
				e.mustSync()
			}
			if got := e.vmi().Status.Phase; got != v1.Failed {
				t.Fatalf("VMI phase = %q, want Failed", got)
			}
			if r := e.record(); r.Observed.Phase != string(v1.Failed) {
				t.Errorf("record phase = %q under a Failed VMI", r.Observed.Phase)
			}
			if tl := e.timeline(); !slices.Contains(tl, "PhaseFailed") {
				t.Errorf("timeline %v lacks PhaseFailed", tl)
			}
		})
	}
}
