package node

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// Observed is what a node sync sees.
type Observed struct {
	// Node is nil when the Node object is gone.
	Node *corev1.Node
	// VMIs are the VMIs labelled with this node's name.
	VMIs []*v1.VirtualMachineInstance
	// PodExists reports whether a VMI's launcher pod still exists.
	PodExists func(vmi *v1.VirtualMachineInstance) bool
	// HeartbeatSeen is when this controller first saw the node's current
	// heartbeat value (zero: unknown). The heartbeat is judged by the
	// younger of its own age and this one's: a controller that starts, or
	// whose API server was away, gives every agent a full threshold to be
	// heard again before calling it silent.
	HeartbeatSeen time.Time
	Now           time.Time
	Threshold     time.Duration
	Recheck       time.Duration
}

// Result is what a node sync should do.
type Result struct {
	MarkUnschedulable bool
	// Fail are the VMIs to move to Failed with reason NodeUnresponsive.
	Fail         []*v1.VirtualMachineInstance
	RequeueAfter time.Duration
}

// Plan decides a node sync. It is pure.
func Plan(o Observed) Result {
	var r Result
	notReady := true // a Node object that is gone counts as NotReady
	if n := o.Node; n != nil {
		hb, ok := heartbeat(n)
		if !ok {
			return r // no agent ever ran here
		}
		age := o.Now.Sub(hb)
		if !o.HeartbeatSeen.IsZero() {
			age = min(age, o.Now.Sub(o.HeartbeatSeen))
		}
		if age < o.Threshold {
			return Result{RequeueAfter: o.Threshold - age + time.Second}
		}
		notReady = !nodeReady(n)
		r.MarkUnschedulable = n.Labels[v1.SchedulableLabel] != "false"
	}
	r.RequeueAfter = o.Recheck
	for _, vmi := range o.VMIs {
		if vmi.Status.Phase.IsFinal() || vmi.Status.Phase == v1.VmPhaseUnset || !vmi.Status.Phase.CanTransitionTo(v1.Failed) {
			continue
		}
		if notReady || !o.PodExists(vmi) {
			r.Fail = append(r.Fail, vmi)
		}
	}
	return r
}

// FailedStatus is vmi's status after failing it for an unresponsive node:
// phase Failed, reason NodeUnresponsive, a Failed transition timestamp and
// Ready=False. Of it the node controller writes only what the ownership
// table grants its exception (v1.StatusOwnership).
func FailedStatus(vmi *v1.VirtualMachineInstance, now time.Time) v1.VirtualMachineInstanceStatus {
	s := *vmi.Status.DeepCopy()
	at := metav1.NewTime(now.Truncate(time.Second))
	s.Phase = v1.Failed
	s.Reason = v1.ReasonNodeUnresponsive
	s.PhaseTransitionTimestamps = append(s.PhaseTransitionTimestamps, v1.VirtualMachineInstancePhaseTransitionTimestamp{
		Phase: v1.Failed, PhaseTransitionTimestamp: at,
	})
	ready := v1.VirtualMachineInstanceCondition{
		Type: v1.VirtualMachineInstanceReady, Status: corev1.ConditionFalse, Reason: v1.ReasonNodeUnresponsive,
		Message: "the node is unresponsive: its agent stopped heartbeating", LastTransitionTime: at,
	}
	for i, c := range s.Conditions {
		if c.Type == v1.VirtualMachineInstanceReady {
			if c.Status == corev1.ConditionFalse {
				ready.LastTransitionTime = c.LastTransitionTime
			}
			s.Conditions[i] = ready
			return s
		}
	}
	s.Conditions = append(s.Conditions, ready)
	return s
}

func heartbeat(n *corev1.Node) (time.Time, bool) {
	v, ok := n.Annotations[v1.HeartbeatAnnotation]
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, true // unparsable counts as stale
	}
	return t, true
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
