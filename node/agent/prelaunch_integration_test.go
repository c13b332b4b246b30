package agent_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/hack/testenv"
	"github.com/nodevirt/nodevirt/node/api"
)

// testPrelaunch: a VMI the controller has not scheduled yet (phase
// Scheduling, no node label) whose launcher runs on the node is started by
// the real agent before Scheduled and taken over once QEMU runs: the
// agent writes Running with the node, the launcher pod as the active pod
// and the Scheduled timestamp, and leaves the label to the controller.
// Labelled afterwards (as the controller does), it stays Running, and it
// was launched once.
func testPrelaunch(t *testing.T, h *harness) {
	v := h.prepareVM(t, "early", vmOpts{binding: "masquerade", unscheduled: true, grace: 3})
	got := v.waitPhase(t, v1.Running, 90*time.Second)
	scheduled := false
	for _, ts := range got.Status.PhaseTransitionTimestamps {
		scheduled = scheduled || ts.Phase == v1.Scheduled
	}
	pod, err := h.kube.CoreV1().Pods(h.ns).Get(h.ctx, v.podName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case got.Status.NodeName != testNode || got.Status.ActivePods[string(pod.UID)] != testNode || len(got.Status.ActivePods) != 1:
		t.Errorf("VMI taken over: nodeName %q, activePods %v; want %s and its launcher pod %s", got.Status.NodeName, got.Status.ActivePods, testNode, pod.UID)
	case !scheduled:
		t.Errorf("VMI taken over without a Scheduled timestamp: %v", got.Status.PhaseTransitionTimestamps)
	case got.Labels[v1.NodeNameLabel] != "" || len(got.Finalizers) != 0:
		t.Errorf("VMI taken over: labels %v, finalizers %v; the agent writes neither", got.Labels, got.Finalizers)
	}
	v.waitSerial(t, "NODEVIRT-GUEST-READY", 90*time.Second)

	// The controller labels it and puts its finalizer on.
	got = v.get()
	got.Labels = map[string]string{v1.NodeNameLabel: testNode}
	got.Finalizers = []string{v1.VirtualMachineInstanceFinalizer}
	if _, err := h.virt.KubevirtV1().VirtualMachineInstances(h.ns).Update(h.ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("label VMI %s: %v", v.name, err)
	}
	testenv.Eventually(t, 30*time.Second, "VMI "+v.name+" Ready once labelled", func() bool {
		got = v.get()
		return got != nil && conditionIs(got, v1.VirtualMachineInstanceReady, corev1.ConditionTrue)
	})
	if got.Status.Phase != v1.Running {
		t.Errorf("VMI %s once labelled: phase %q, want Running", v.name, got.Status.Phase)
	}
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
