package vmi

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// Reasons the controller writes on VMI conditions and status.reason.
const (
	ReasonErrImagePull     = "ErrImagePull"
	ReasonImagePullBackOff = "ImagePullBackOff"
	ReasonUnschedulable    = corev1.PodReasonUnschedulable
	ReasonPvcNotFound      = "PvcNotFound"
	// ReasonPodFailed: the launcher pod ended before the agent took over.
	ReasonPodFailed = "PodFailed"
	// ReasonPodDeleted: the launcher pod was deleted or vanished before the
	// agent took over.
	ReasonPodDeleted = "PodDeleted"
)

// PodScheduledCondition is the VMI condition mirroring the launcher pod's
// PodScheduled=False (KubeVirt's spelling).
const PodScheduledCondition v1.VirtualMachineInstanceConditionType = "PodScheduled"

// Observed is what a VMI sync sees.
type Observed struct {
	VMI *v1.VirtualMachineInstance
	// Pod is the VMI's launcher pod (created-by = the VMI's UID), or nil.
	Pod *corev1.Pod
	// PodPending is true while a pod this controller created is not yet in
	// the informer cache.
	PodPending bool
	// RenderErr is why the pod cannot be rendered (e.g. ErrPVCNotFound).
	RenderErr error
	// Volumes are the status.volumeStatus entries of the PVC volumes, as
	// the pod to create was rendered from them.
	Volumes []v1.VolumeStatus
	Now     time.Time
}

// Result is what a VMI sync should do.
type Result struct {
	AddFinalizer    bool
	RemoveFinalizer bool
	CreatePod       bool
	// DeletePod deletes Observed.Pod.
	DeletePod bool
	// NodeLabel, if set, is the kubevirt.io/nodeName label to put on the VMI.
	NodeLabel string
	// Status is the VMI status to write (only if it changed).
	Status v1.VirtualMachineInstanceStatus
}

// Plan decides a VMI sync. It is pure. The controller writes the phase only
// while it is "", Pending or Scheduling; from Scheduled on the agent does.
func Plan(o Observed) Result {
	vmi := o.VMI
	r := Result{Status: *vmi.Status.DeepCopy()}
	if vmi.DeletionTimestamp != nil {
		return planDeletion(o, r)
	}
	// The finalizer goes on with the node label, in one write, when the
	// pod runs: before that no agent holds anything to clean up, and a
	// deleted VMI's pod is deleted by this controller (deleteStale). The
	// VM controller creates its VMIs with it.
	if vmi.Status.Phase.OwnedByAgent() {
		r.AddFinalizer = !hasFinalizer(vmi)
		if vmi.Unlabelled() && vmi.Status.NodeName != "" {
			// The agent took the VMI over before this controller saw its
			// pod run (node/agent/prelaunch.go): label it as if scheduled.
			r.NodeLabel = vmi.Status.NodeName
		}
		return r
	}
	pod := o.Pod
	switch {
	case pod == nil && o.PodPending:
		setPhase(&r.Status, v1.Pending, o.Now)
	case pod == nil && vmi.Status.Phase == v1.Scheduling:
		fail(&r.Status, ReasonPodDeleted, o.Now)
	case pod == nil && o.RenderErr != nil:
		setPhase(&r.Status, v1.Pending, o.Now)
		setCondition(&r.Status, v1.VirtualMachineInstanceSynchronized, ReasonPvcNotFound, o.RenderErr.Error(), o.Now)
	case pod == nil:
		// The status is written only if the create succeeded, so the pod
		// exists by then: record Pending and Scheduling in one write.
		setPhase(&r.Status, v1.Pending, o.Now)
		setPhase(&r.Status, v1.Scheduling, o.Now)
		dropCondition(&r.Status, v1.VirtualMachineInstanceSynchronized)
		r.Status.VolumeStatus = o.Volumes
		r.CreatePod = true
	case pod.DeletionTimestamp != nil:
		fail(&r.Status, ReasonPodDeleted, o.Now)
	case pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded:
		fail(&r.Status, ReasonPodFailed, o.Now)
	case pod.Status.Phase == corev1.PodRunning && pod.Spec.NodeName != "":
		setPhase(&r.Status, v1.Scheduled, o.Now)
		r.AddFinalizer = !hasFinalizer(vmi)
		r.Status.NodeName = pod.Spec.NodeName
		r.Status.ActivePods = map[string]string{string(pod.UID): pod.Spec.NodeName}
		dropCondition(&r.Status, PodScheduledCondition)
		dropCondition(&r.Status, v1.VirtualMachineInstanceSynchronized)
		if vmi.Labels[v1.NodeNameLabel] != pod.Spec.NodeName {
			r.NodeLabel = pod.Spec.NodeName
		}
	default:
		setPhase(&r.Status, v1.Scheduling, o.Now)
		podProblems(&r.Status, pod, o.Now)
	}
	return r
}

// planDeletion: the agent removes its finalizer once the guest is down;
// then the VMI disappears and the controller deletes the pod. A VMI no agent
// took over (never Scheduled) or on an unresponsive node has no agent to do
// that, so the controller deletes the pod and removes the finalizer itself.
func planDeletion(o Observed, r Result) Result {
	vmi := o.VMI
	if !hasFinalizer(vmi) {
		r.DeletePod = o.Pod != nil && o.Pod.DeletionTimestamp == nil
		return r
	}
	if agentTookOver(vmi) && vmi.Status.Reason != v1.ReasonNodeUnresponsive {
		return r
	}
	r.DeletePod = o.Pod != nil && o.Pod.DeletionTimestamp == nil
	r.RemoveFinalizer = true
	return r
}

// agentTookOver reports whether the VMI ever reached Scheduled.
func agentTookOver(vmi *v1.VirtualMachineInstance) bool {
	if vmi.Status.Phase == v1.Scheduled || vmi.Status.Phase == v1.Running || vmi.Status.Phase == v1.Unknown {
		return true
	}
	for _, t := range vmi.Status.PhaseTransitionTimestamps {
		if t.Phase == v1.Scheduled {
			return true
		}
	}
	return false
}

// podProblems mirrors why a launcher pod does not run yet: unschedulable,
// or an image that cannot be pulled.
func podProblems(s *v1.VirtualMachineInstanceStatus, pod *corev1.Pod, now time.Time) {
	dropCondition(s, PodScheduledCondition)
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			setCondition(s, PodScheduledCondition, c.Reason, c.Message, now)
		}
	}
	dropCondition(s, v1.VirtualMachineInstanceSynchronized)
	statuses := append(append([]corev1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...)
	for _, cs := range statuses {
		if w := cs.State.Waiting; w != nil && (w.Reason == ReasonErrImagePull || w.Reason == ReasonImagePullBackOff) {
			setCondition(s, v1.VirtualMachineInstanceSynchronized, w.Reason, cs.Name+": "+w.Message, now)
			return
		}
	}
}

// setPhase moves the phase if the transition table allows it, recording
// the transition time.
func setPhase(s *v1.VirtualMachineInstanceStatus, p v1.VirtualMachineInstancePhase, now time.Time) {
	if s.Phase == p || !s.Phase.CanTransitionTo(p) {
		return
	}
	s.Phase = p
	s.PhaseTransitionTimestamps = append(s.PhaseTransitionTimestamps, v1.VirtualMachineInstancePhaseTransitionTimestamp{
		Phase: p, PhaseTransitionTimestamp: metav1.NewTime(now.Truncate(time.Second)),
	})
}

func fail(s *v1.VirtualMachineInstanceStatus, reason string, now time.Time) {
	if s.Phase.CanTransitionTo(v1.Failed) && s.Phase != v1.Failed {
		s.Reason = reason
		setPhase(s, v1.Failed, now)
	}
}

// setCondition sets a False condition with reason and message, keeping the
// transition time when nothing changed.
func setCondition(s *v1.VirtualMachineInstanceStatus, t v1.VirtualMachineInstanceConditionType, reason, msg string, now time.Time) {
	for i, c := range s.Conditions {
		if c.Type == t {
			if c.Status != corev1.ConditionFalse || c.Reason != reason {
				c.LastTransitionTime = metav1.NewTime(now.Truncate(time.Second))
			}
			c.Status, c.Reason, c.Message = corev1.ConditionFalse, reason, msg
			s.Conditions[i] = c
			return
		}
	}
	s.Conditions = append(s.Conditions, v1.VirtualMachineInstanceCondition{
		Type: t, Status: corev1.ConditionFalse, Reason: reason, Message: msg,
		LastTransitionTime: metav1.NewTime(now.Truncate(time.Second)),
	})
}

func dropCondition(s *v1.VirtualMachineInstanceStatus, t v1.VirtualMachineInstanceConditionType) {
	var out []v1.VirtualMachineInstanceCondition
	for _, c := range s.Conditions {
		if c.Type != t {
			out = append(out, c)
		}
	}
	s.Conditions = out
}

func hasFinalizer(vmi *v1.VirtualMachineInstance) bool {
	for _, f := range vmi.Finalizers {
		if f == v1.VirtualMachineInstanceFinalizer {
			return true
		}
	}
	return false
}
