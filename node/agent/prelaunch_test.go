package agent_test

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/node/launcher"
)

// newPrelaunchEnv is a sync env whose VMI the controller has not
// scheduled yet: phase Scheduling, no node label (so not in the agent's
// caches), its launcher pod on the node and owned by it.
func newPrelaunchEnv(t *testing.T) *syncEnv {
	t.Helper()
	e := newSyncEnv(t)
	vmi := e.vmi()
	delete(vmi.Labels, v1.NodeNameLabel)
	vmi.Finalizers = nil
	vmi.Status = v1.VirtualMachineInstanceStatus{Phase: v1.Scheduling}
	e.update(vmi)
	e.updatePod(func(pod *corev1.Pod) {
		pod.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(vmi, v1.SchemeGroupVersion.WithKind("VirtualMachineInstance"))}
		pod.Status.Phase = corev1.PodPending // the kubelet has not reported it running
	})
	return e
}

// updatePod changes the launcher pod in the fake API server and the caches.
func (e *syncEnv) updatePod(change func(*corev1.Pod)) {
	e.t.Helper()
	pod, err := e.kube.CoreV1().Pods(syncNS).Get(e.t.Context(), "virt-launcher-vm", metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	change(pod)
	if _, err := e.kube.CoreV1().Pods(syncNS).Update(e.t.Context(), pod, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	e.refresh()
}

// vmiGets counts the agent's reads of the VMI from the API server.
func (e *syncEnv) vmiGets() int {
	n := 0
	for _, a := range e.virt.Actions() {
		if a.GetVerb() == "get" && a.GetResource().Resource == "virtualmachineinstances" {
			n++
		}
	}
	return n
}

// TestSync_PrelaunchBeforeScheduled: the launcher of a VMI the controller
// has not scheduled yet answers; the agent builds the network, launches
// and attaches QEMU, and takes the VMI over once the domain runs: one
// status write from Scheduling to Running with the node, the active pod
// and the Scheduled timestamp, and no label. Labelled by the controller
// afterwards, it needs nothing more.
func TestSync_PrelaunchBeforeScheduled(t *testing.T) {
	e := newPrelaunchEnv(t)
	e.virt.ClearActions()

	e.mustSync()
	if got := e.launcher.Specs(); len(got) != 1 {
		t.Fatalf("launched %d specs before Scheduled, want 1", len(got))
	}
	if got := e.apiActions(); len(got) != 0 {
		t.Errorf("API writes before QEMU runs: %v, want none", got)
	}
	e.qemuStarts()
	e.mustSync()
	want := []string{"network.Ensure " + syncTap, "dhcp.Listen " + syncBridge, "launcher.Launch", "qmp.Dial"}
	if diff := cmp.Diff(want, e.log.Calls()); diff != "" {
		t.Errorf("effects before Scheduled (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"patch/status"}, e.apiActions()); diff != "" {
		t.Errorf("API writes of the takeover (-want +got):\n%s", diff)
	}
	got := e.vmi()
	var phases []v1.VirtualMachineInstancePhase
	for _, ts := range got.Status.PhaseTransitionTimestamps {
		phases = append(phases, ts.Phase)
	}
	pod, err := e.kube.CoreV1().Pods(syncNS).Get(t.Context(), "virt-launcher-vm", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case got.Status.Phase != v1.Running:
		t.Errorf("VMI phase after the takeover = %q, want Running", got.Status.Phase)
	case got.Status.NodeName != syncNode:
		t.Errorf("status.nodeName after the takeover = %q, want %q", got.Status.NodeName, syncNode)
	case !cmp.Equal(got.Status.ActivePods, map[string]string{string(pod.UID): syncNode}):
		t.Errorf("status.activePods after the takeover = %v, want the launcher pod on %s", got.Status.ActivePods, syncNode)
	case !slices.Contains(phases, v1.Scheduled) || !slices.Contains(phases, v1.Running):
		t.Errorf("transition timestamps after the takeover: %v, want Scheduled and Running", phases)
	case got.Labels[v1.NodeNameLabel] != "":
		t.Errorf("the agent labelled the VMI %q; the label is the controller's", got.Labels[v1.NodeNameLabel])
	}

	// The controller labels it and puts its finalizer on.
	got.Labels = map[string]string{v1.NodeNameLabel: syncNode}
	got.Finalizers = []string{v1.VirtualMachineInstanceFinalizer}
	e.update(got)
	e.log.Reset()
	e.virt.ClearActions()
	e.mustSync()
	if got := e.vmi().Status.Phase; got != v1.Running {
		t.Errorf("VMI phase once labelled = %q, want Running", got)
	}
	if got := e.log.Calls(); len(got) != 0 {
		t.Errorf("effects once labelled: %v, want none (QEMU was attached before)", got)
	}
	if got := e.apiActions(); len(got) != 0 {
		t.Errorf("API writes once labelled: %v, want none", got)
	}
	if got := e.launcher.Specs(); len(got) != 1 {
		t.Errorf("launched %d specs in all, want 1", len(got))
	}
	wantTL := []string{"Adopted", "NetworkAllocated", "Launching", "Attached", "PhaseRunning"}
	if diff := cmp.Diff(wantTL, e.timeline()); diff != "" {
		t.Errorf("timeline (-want +got):\n%s", diff)
	}
}

// TestSync_PrelaunchScheduledFirst: when the controller's Scheduled lands
// before the agent took the VMI over, the VMI is reported Running the
// usual way, without a second launch.
func TestSync_PrelaunchScheduledFirst(t *testing.T) {
	e := newPrelaunchEnv(t)
	e.mustSync()
	e.qemuStarts()
	// The controller schedules it while the agent's view is the old one.
	vmi := e.vmi()
	vmi.Labels = map[string]string{v1.NodeNameLabel: syncNode}
	vmi.Finalizers = []string{v1.VirtualMachineInstanceFinalizer}
	vmi.Status.Phase, vmi.Status.NodeName = v1.Scheduled, syncNode
	e.update(vmi)
	e.mustSync()
	got := e.vmi()
	if got.Status.Phase != v1.Running || got.Status.NodeName != syncNode {
		t.Errorf("VMI after Scheduled: phase %q on %q, want Running on %s", got.Status.Phase, got.Status.NodeName, syncNode)
	}
	if got := e.launcher.Specs(); len(got) != 1 {
		t.Errorf("launched %d specs in all, want 1", len(got))
	}
}

// TestSync_PrelaunchWaitsForLauncherWithoutReads: while the launcher does
// not answer, the agent neither reads the VMI nor creates a record, and
// looks again soon.
func TestSync_PrelaunchWaitsForLauncherWithoutReads(t *testing.T) {
	e := newPrelaunchEnv(t)
	e.launcher.Down()
	e.virt.ClearActions()
	e.mustSync()
	if n := e.vmiGets(); n != 0 {
		t.Errorf("%d reads of the VMI while its launcher is down, want 0", n)
	}
	if _, err := e.db.Get(t.Context(), syncUID); err == nil {
		t.Error("a record exists before the launcher answered")
	}
	e.launcher.Set(launcher.Status{State: launcher.StateWaiting})
	e.mustSync()
	if n := e.vmiGets(); n == 0 {
		t.Error("no read of the VMI once its launcher answers")
	}
	if got := e.launcher.Specs(); len(got) != 1 {
		t.Errorf("launched %d specs once the launcher answers, want 1", len(got))
	}
}

// TestSync_PrelaunchedVMIDeleted: a VMI deleted before Scheduled (the
// controller deletes its pod and lets it go) is an orphan to the agent:
// its QEMU is quit, its network released, its record marked gone, and
// nothing is written to the API server.
func TestSync_PrelaunchedVMIDeleted(t *testing.T) {
	e := newPrelaunchEnv(t)
	e.mustSync()
	e.qemuStarts()
	e.mustSync()
	e.log.Reset()
	e.virt.ClearActions()

	if err := e.virt.Tracker().Delete(v1.SchemeGroupVersion.WithResource("virtualmachineinstances"), syncNS, syncVMI); err != nil {
		t.Fatal(err)
	}
	e.refresh()
	e.mustSync()
	if calls := e.log.Calls(); !slices.Contains(calls, "qmp.Quit") {
		t.Errorf("effects after the deletion %v, want qmp.Quit", calls)
	}
	e.qemuExits(launcher.Exit{Code: 0})
	e.mustSync()
	if r := e.record(); !r.IsGone() {
		t.Errorf("record after the orphan's QEMU exited: gone %v, want a tombstone", r.Gone)
	}
	if got := e.apiActions(); len(got) != 0 {
		t.Errorf("API writes for the deleted VMI: %v, want none", got)
	}
}

// TestSync_NoPrelaunch lists the launcher pods and VMIs the agent leaves
// to the controller's Scheduled.
func TestSync_NoPrelaunch(t *testing.T) {
	tests := []struct {
		name  string
		setup func(e *syncEnv)
	}{
		{"VMIPending", func(e *syncEnv) {
			vmi := e.vmi()
			vmi.Status.Phase = v1.Pending
			e.update(vmi)
		}},
		{"VMIDeleting", func(e *syncEnv) {
			vmi := e.vmi()
			ts := metav1.NewTime(e.clock())
			vmi.DeletionTimestamp = &ts
			vmi.Finalizers = []string{"keep"}
			e.update(vmi)
		}},
		{"VMIFailed", func(e *syncEnv) {
			vmi := e.vmi()
			vmi.Status.Phase = v1.Failed
			e.update(vmi)
		}},
		{"VMIOnAnotherNode", func(e *syncEnv) {
			vmi := e.vmi()
			vmi.Labels = map[string]string{v1.NodeNameLabel: "node2"}
			e.update(vmi)
		}},
		{"PodDeleting", func(e *syncEnv) {
			e.updatePod(func(pod *corev1.Pod) {
				ts := metav1.NewTime(e.clock())
				pod.DeletionTimestamp = &ts
			})
		}},
		{"PodFailed", func(e *syncEnv) {
			e.updatePod(func(pod *corev1.Pod) { pod.Status.Phase = corev1.PodFailed })
		}},
		{"MigrationTargetPod", func(e *syncEnv) {
			e.updatePod(func(pod *corev1.Pod) { pod.Labels[v1.MigrationJobUIDLabel] = "mig-1" })
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newPrelaunchEnv(t)
			tt.setup(e)
			e.virt.ClearActions()
			e.mustSync()
			if calls := e.log.Calls(); len(calls) != 0 {
				t.Errorf("effects %v, want none", calls)
			}
			if _, err := e.db.Get(t.Context(), syncUID); err == nil {
				t.Error("a record was created")
			}
			if got := e.apiActions(); len(got) != 0 {
				t.Errorf("API writes %v, want none", got)
			}
		})
	}
}
