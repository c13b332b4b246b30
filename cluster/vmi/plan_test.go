package vmi

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func vmiIn(phase v1.VirtualMachineInstancePhase, mods ...func(*v1.VirtualMachineInstance)) *v1.VirtualMachineInstance {
	vmi := baseVMI(func(vmi *v1.VirtualMachineInstance) {
		vmi.Finalizers = []string{v1.VirtualMachineInstanceFinalizer}
		vmi.Status.Phase = phase
	})
	for _, m := range mods {
		m(vmi)
	}
	return vmi
}

func podIn(phase corev1.PodPhase, node string, mods ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "virt-launcher-testvm-abcde", UID: "pod-uid",
			Labels: map[string]string{v1.AppLabel: v1.LauncherAppValue, v1.CreatedByLabel: "1234-uid"}},
		Spec:   corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{Phase: phase},
	}
	for _, m := range mods {
		m(p)
	}
	return p
}

// onNode puts the VMI's status on node, and the node label on it if
// labelled.
func onNode(node string, labelled bool) func(*v1.VirtualMachineInstance) {
	return func(vmi *v1.VirtualMachineInstance) {
		vmi.Status.NodeName = node
		if labelled {
			if vmi.Labels == nil {
				vmi.Labels = map[string]string{}
			}
			vmi.Labels[v1.NodeNameLabel] = node
		}
	}
}

func waiting(reason string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "volumeroot", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: "pull failed"}}}}
	}
}

func TestPlan_Phases(t *testing.T) {
	deleted := func(p *corev1.Pod) { p.DeletionTimestamp = ptr.To(metav1.NewTime(t0)) }
	unschedulable := func(p *corev1.Pod) {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: "0/1 nodes"}}
	}
	tests := []struct {
		name      string
		o         Observed
		wantPhase v1.VirtualMachineInstancePhase
		wantPod   bool
		wantLabel string
		wantCond  string // reason of a False condition the controller set
		wantWhy   string // status.reason
	}{
		{"new vmi: create pod, scheduling", Observed{VMI: vmiIn("")}, v1.Scheduling, true, "", "", ""},
		{"pod creation in flight", Observed{VMI: vmiIn(v1.Pending), PodPending: true}, v1.Pending, false, "", "", ""},
		{"missing pvc", Observed{VMI: vmiIn(v1.Pending), RenderErr: ErrPVCNotFound}, v1.Pending, false, "", ReasonPvcNotFound, ""},
		{"pod exists unbound: scheduling", Observed{VMI: vmiIn(v1.Pending), Pod: podIn(corev1.PodPending, "")}, v1.Scheduling, false, "", "", ""},
		{"pod unschedulable", Observed{VMI: vmiIn(v1.Scheduling), Pod: podIn(corev1.PodPending, "", unschedulable)}, v1.Scheduling, false, "", ReasonUnschedulable, ""},
		{"image pull error", Observed{VMI: vmiIn(v1.Scheduling), Pod: podIn(corev1.PodPending, "n1", waiting(ReasonErrImagePull))}, v1.Scheduling, false, "", ReasonErrImagePull, ""},
		{"image pull backoff", Observed{VMI: vmiIn(v1.Scheduling), Pod: podIn(corev1.PodPending, "n1", waiting(ReasonImagePullBackOff))}, v1.Scheduling, false, "", ReasonImagePullBackOff, ""},
		{"pod running: scheduled", Observed{VMI: vmiIn(v1.Scheduling), Pod: podIn(corev1.PodRunning, "n1")}, v1.Scheduled, false, "n1", "", ""},
		{"pod running seen late", Observed{VMI: vmiIn(""), Pod: podIn(corev1.PodRunning, "n1")}, v1.Scheduled, false, "n1", "", ""},
		{"pod failed before handoff", Observed{VMI: vmiIn(v1.Scheduling), Pod: podIn(corev1.PodFailed, "n1")}, v1.Failed, false, "", "", ReasonPodFailed},
		{"pod deleted before handoff", Observed{VMI: vmiIn(v1.Scheduling), Pod: podIn(corev1.PodPending, "n1", deleted)}, v1.Failed, false, "", "", ReasonPodDeleted},
		{"pod gone before handoff", Observed{VMI: vmiIn(v1.Scheduling)}, v1.Failed, false, "", "", ReasonPodDeleted},
		{"agent owns running", Observed{VMI: vmiIn(v1.Running)}, v1.Running, false, "", "", ""},
		{"agent took over before the pod ran: label its node", Observed{VMI: vmiIn(v1.Running, onNode("n1", false)), Pod: podIn(corev1.PodPending, "n1")}, v1.Running, false, "n1", "", ""},
		{"agent took over, labelled: nothing to do", Observed{VMI: vmiIn(v1.Running, onNode("n1", true)), Pod: podIn(corev1.PodRunning, "n1")}, v1.Running, false, "", "", ""},
		{"agent owns scheduled, even without pod", Observed{VMI: vmiIn(v1.Scheduled)}, v1.Scheduled, false, "", "", ""},
		{"final stays", Observed{VMI: vmiIn(v1.Succeeded), Pod: podIn(corev1.PodSucceeded, "n1")}, v1.Succeeded, false, "", "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.Now = t0
			before := tc.o.VMI.DeepCopy()
			r := Plan(tc.o)
			if diff := cmp.Diff(before, tc.o.VMI); diff != "" {
				t.Fatalf("Plan mutated the VMI:\n%s", diff)
			}
			if r.Status.Phase != tc.wantPhase {
				t.Errorf("phase = %q, want %q", r.Status.Phase, tc.wantPhase)
			}
			if r.CreatePod != tc.wantPod {
				t.Errorf("CreatePod = %v, want %v", r.CreatePod, tc.wantPod)
			}
			if r.NodeLabel != tc.wantLabel {
				t.Errorf("NodeLabel = %q, want %q", r.NodeLabel, tc.wantLabel)
			}
			if r.Status.Reason != tc.wantWhy {
				t.Errorf("reason = %q, want %q", r.Status.Reason, tc.wantWhy)
			}
			var cond string
			for _, c := range r.Status.Conditions {
				if c.Status == corev1.ConditionFalse {
					cond = c.Reason
				}
			}
			if cond != tc.wantCond {
				t.Errorf("condition reason = %q, want %q (%+v)", cond, tc.wantCond, r.Status.Conditions)
			}
			if r.Status.Phase != before.Status.Phase {
				ts := r.Status.PhaseTransitionTimestamps
				if len(ts) == 0 || ts[len(ts)-1].Phase != r.Status.Phase || !ts[len(ts)-1].PhaseTransitionTimestamp.Time.Equal(t0) {
					t.Errorf("transition to %s not recorded: %+v", r.Status.Phase, ts)
				}
			}
			if tc.wantLabel != "" && r.Status.NodeName != tc.wantLabel {
				t.Errorf("nodeName = %q", r.Status.NodeName)
			}
		})
	}
}

func TestPlan_Finalizer(t *testing.T) {
	del := func(vmi *v1.VirtualMachineInstance) { vmi.DeletionTimestamp = ptr.To(metav1.NewTime(t0)) }
	wasScheduled := func(vmi *v1.VirtualMachineInstance) {
		vmi.Status.PhaseTransitionTimestamps = []v1.VirtualMachineInstancePhaseTransitionTimestamp{{Phase: v1.Scheduled}}
	}
	unresponsive := func(vmi *v1.VirtualMachineInstance) { vmi.Status.Reason = v1.ReasonNodeUnresponsive }
	noFinalizer := func(vmi *v1.VirtualMachineInstance) { vmi.Finalizers = nil }
	tests := []struct {
		name                   string
		vmi                    *v1.VirtualMachineInstance
		pod                    *corev1.Pod
		add, remove, deletePod bool
	}{
		{"not at first sight", vmiIn("", noFinalizer), nil, false, false, false},
		{"not while scheduling", vmiIn(v1.Scheduling, noFinalizer), podIn(corev1.PodPending, ""), false, false, false},
		{"with the node label when the pod runs", vmiIn(v1.Scheduling, noFinalizer), podIn(corev1.PodRunning, "n1"), true, false, false},
		{"on a running VMI without one", vmiIn(v1.Running, noFinalizer), podIn(corev1.PodRunning, "n1"), true, false, false},
		{"deleted while scheduling without one: pod deleted", vmiIn(v1.Scheduling, del, noFinalizer), podIn(corev1.PodPending, ""), false, false, true},
		{"deleted before any agent: controller releases", vmiIn(v1.Scheduling, del), podIn(corev1.PodPending, ""), false, true, true},
		{"deleted running: agent's turn", vmiIn(v1.Running, del), podIn(corev1.PodRunning, "n1"), false, false, false},
		{"deleted failed after scheduled: agent's turn", vmiIn(v1.Failed, del, wasScheduled), podIn(corev1.PodFailed, "n1"), false, false, false},
		{"deleted failed before scheduled: controller", vmiIn(v1.Failed, del), podIn(corev1.PodFailed, "n1"), false, true, true},
		{"deleted on unresponsive node: controller", vmiIn(v1.Failed, del, wasScheduled, unresponsive), podIn(corev1.PodRunning, "n1"), false, true, true},
		{"agent released: delete pod", vmiIn(v1.Succeeded, del, noFinalizer), podIn(corev1.PodSucceeded, "n1"), false, false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := Plan(Observed{VMI: tc.vmi, Pod: tc.pod, Now: t0})
			if r.AddFinalizer != tc.add || r.RemoveFinalizer != tc.remove || r.DeletePod != tc.deletePod {
				t.Errorf("add/remove/deletePod = %v/%v/%v, want %v/%v/%v", r.AddFinalizer, r.RemoveFinalizer, r.DeletePod, tc.add, tc.remove, tc.deletePod)
			}
		})
	}
}
