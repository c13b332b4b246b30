package node

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func testNode(heartbeatAge time.Duration, ready corev1.ConditionStatus) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{v1.SchedulableLabel: "true"}}}
	if heartbeatAge >= 0 {
		n.Annotations = map[string]string{v1.HeartbeatAnnotation: t0.Add(-heartbeatAge).Format(time.RFC3339)}
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}
	return n
}

func vmiOn(name string, phase v1.VirtualMachineInstancePhase) *v1.VirtualMachineInstance {
	return &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)},
		Status: v1.VirtualMachineInstanceStatus{Phase: phase, NodeName: "n1"}}
}

func TestPlan(t *testing.T) {
	vmis := []*v1.VirtualMachineInstance{vmiOn("running", v1.Running), vmiOn("done", v1.Succeeded), vmiOn("podless", v1.Scheduled)}
	podExists := func(vmi *v1.VirtualMachineInstance) bool { return vmi.Name != "podless" }
	tests := []struct {
		name        string
		node        *corev1.Node
		unsched     bool
		fail        []string
		requeueNear time.Duration
		seen        time.Time
	}{
		{"fresh heartbeat: check again when it would go stale", testNode(time.Minute, corev1.ConditionTrue), false, nil, 4*time.Minute + time.Second, time.Time{}},
		{"no heartbeat: never had an agent", testNode(-1, corev1.ConditionTrue), false, nil, 0, time.Time{}},
		{"stale, node Ready: only pod-less VMIs fail", testNode(6*time.Minute, corev1.ConditionTrue), true, []string{"podless"}, DefaultRecheck, time.Time{}},
		{"stale, node NotReady: all live VMIs fail", testNode(6*time.Minute, corev1.ConditionFalse), true, []string{"running", "podless"}, DefaultRecheck, time.Time{}},
		{"node object gone", nil, false, []string{"running", "podless"}, DefaultRecheck, time.Time{}},
		{"stale heartbeat seen only now (controller restarted, API server back): a full threshold first",
			testNode(6*time.Minute, corev1.ConditionFalse), false, nil, DefaultThreshold + time.Second, t0},
		{"stale heartbeat unchanged for the threshold since first seen", testNode(11*time.Minute, corev1.ConditionFalse), true,
			[]string{"running", "podless"}, DefaultRecheck, t0.Add(-DefaultThreshold)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := Plan(Observed{Node: tc.node, VMIs: vmis, PodExists: podExists, HeartbeatSeen: tc.seen, Now: t0, Threshold: DefaultThreshold, Recheck: DefaultRecheck})
			if r.MarkUnschedulable != tc.unsched {
				t.Errorf("MarkUnschedulable = %v, want %v", r.MarkUnschedulable, tc.unsched)
			}
			var failed []string
			for _, v := range r.Fail {
				failed = append(failed, v.Name)
			}
			if len(failed) != len(tc.fail) || (len(failed) > 0 && failed[0] != tc.fail[0]) {
				t.Errorf("Fail = %v, want %v", failed, tc.fail)
			}
			if r.RequeueAfter != tc.requeueNear {
				t.Errorf("RequeueAfter = %s, want %s", r.RequeueAfter, tc.requeueNear)
			}
		})
	}
}

func TestFailedStatus(t *testing.T) {
	s := FailedStatus(vmiOn("x", v1.Running), t0)
	if s.Phase != v1.Failed || s.Reason != v1.ReasonNodeUnresponsive || len(s.PhaseTransitionTimestamps) != 1 {
		t.Errorf("status = %+v", s)
	}
}
