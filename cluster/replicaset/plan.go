package replicaset

import (
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// BurstReplicas caps the creates or deletes of one sync (KubeVirt's
// default burst), so a large scale step reaches the API server in waves.
const BurstReplicas = 250

// Observed is what a sync sees: the replica set, every VMI of its namespace
// (from the informer cache), whether the creates and deletes of earlier
// syncs have all shown up in the cache, and the time.
type Observed struct {
	RS   *v1.VirtualMachineInstanceReplicaSet
	VMIs []*v1.VirtualMachineInstance
	// Settled is false while a create or delete of an earlier sync has not
	// reached the informer cache: the replica set does not scale then (the
	// cache would undercount or overcount).
	Settled bool
	Now     time.Time
}

// Result is what a sync should do. Every list is in the order to act.
type Result struct {
	// Adopt are orphan VMIs the selector matches: the replica set becomes
	// their controller.
	Adopt []*v1.VirtualMachineInstance
	// Release are owned VMIs the selector no longer matches: the replica
	// set removes its owner reference.
	Release []*v1.VirtualMachineInstance
	// Create is how many VMIs to create from the template.
	Create int
	// Delete are the VMIs to delete: ended ones (to be replaced), then the
	// surplus in scale-down order.
	Delete []*v1.VirtualMachineInstance
	// Status is the replica set status to write, without ReplicaFailure
	// (the outcome of the actions decides it).
	Status v1.VirtualMachineInstanceReplicaSetStatus
}

// Plan decides a sync's actions and the replica set's status. It is pure:
// it reads only its input and never mutates it. A replica set whose
// selector does not parse plans nothing (the CRD's validation forbids it).
func Plan(o Observed) Result {
	rs := o.RS
	status := *rs.Status.DeepCopy()
	selector, err := rs.Spec.Selector.AsSelector()
	if err != nil || rs.Spec.Template == nil {
		return Result{Status: status}
	}
	var r Result
	var mine []*v1.VirtualMachineInstance
	deleting := rs.DeletionTimestamp != nil
	for _, vmi := range o.VMIs {
		matches := selector.Matches(labels.Set(vmi.Labels))
		switch ref := metav1.GetControllerOf(vmi); {
		case ref != nil && ref.UID == rs.UID:
			if !matches && vmi.DeletionTimestamp == nil && !deleting {
				r.Release = append(r.Release, vmi)
				continue
			}
			mine = append(mine, vmi)
		case ref == nil && matches && vmi.DeletionTimestamp == nil && !deleting:
			r.Adopt = append(r.Adopt, vmi)
			mine = append(mine, vmi)
		}
	}
	var active, ended []*v1.VirtualMachineInstance
	for _, vmi := range mine {
		switch {
		case vmi.DeletionTimestamp != nil:
		case vmi.Status.Phase.IsFinal() || terminating(vmi):
			ended = append(ended, vmi)
		default:
			active = append(active, vmi)
		}
	}
	sortEnded(ended)
	if o.Settled && !rs.Spec.Paused && !deleting {
		diff := len(active) - int(rs.Spec.DesiredReplicas())
		switch {
		case diff < 0:
			r.Create = min(-diff, BurstReplicas)
		case diff > 0:
			sortForScaleDown(active)
			r.Delete = active[:min(diff, BurstReplicas)]
		}
		// An ended VMI is replaced: deleted here, and not counted above,
		// so its successor is created in the same sync.
		r.Delete = append(ended[:min(len(ended), BurstReplicas):min(len(ended), BurstReplicas)], r.Delete...)
	}
	status.Replicas = int32(len(active))
	status.ReadyReplicas = int32(countReady(active))
	status.LabelSelector = selector.String()
	status.Conditions = setPaused(status.Conditions, rs.Spec.Paused, o.Now)
	r.Status = status
	return r
}

// terminating reports a VMI whose launcher pod is going away (KubeVirt
// counts it as finished: Ready False with reason PodTerminating).
func terminating(vmi *v1.VirtualMachineInstance) bool {
	for _, c := range vmi.Status.Conditions {
		if c.Type == v1.VirtualMachineInstanceReady && c.Status == corev1.ConditionFalse && c.Reason == v1.ReasonPodTerminating {
			return true
		}
	}
	return false
}

func countReady(vmis []*v1.VirtualMachineInstance) int {
	n := 0
	for _, vmi := range vmis {
		if vmi.IsReady() {
			n++
		}
	}
	return n
}

// startRank orders VMIs by how far they got: not yet running first.
func startRank(vmi *v1.VirtualMachineInstance) int {
	switch vmi.Status.Phase {
	case v1.VmPhaseUnset, v1.Pending:
		return 0
	case v1.Scheduling:
		return 1
	case v1.Scheduled:
		return 2
	case v1.Running:
		return 3
	}
	return 0 // Unknown: as good as not started
}

// sortForScaleDown orders active VMIs by how cheap they are to lose, the
// cheapest first: not yet running before running (Pending, then
// Scheduling, then Scheduled), not ready before ready, the newest before
// older ones, and the greater name first for a stable order. (KubeVirt
// v1.6 deletes in informer order with a TODO for "not yet running first";
// this is the order apps/v1 ReplicaSets use, applied to VMI phases.)
func sortForScaleDown(vmis []*v1.VirtualMachineInstance) {
	sort.SliceStable(vmis, func(i, j int) bool {
		a, b := vmis[i], vmis[j]
		if ra, rb := startRank(a), startRank(b); ra != rb {
			return ra < rb
		}
		if ra, rb := a.IsReady(), b.IsReady(); ra != rb {
			return !ra
		}
		if ta, tb := a.CreationTimestamp, b.CreationTimestamp; !ta.Equal(&tb) {
			return tb.Before(&ta)
		}
		return a.Name > b.Name
	})
}

// sortEnded orders ended VMIs by name, so a burst-capped replacement is
// deterministic.
func sortEnded(vmis []*v1.VirtualMachineInstance) {
	sort.Slice(vmis, func(i, j int) bool { return vmis[i].Name < vmis[j].Name })
}

// setPaused sets or removes the ReplicaPaused condition, keeping its
// transition time while it stays.
func setPaused(conds []v1.VirtualMachineInstanceReplicaSetCondition, paused bool, now time.Time) []v1.VirtualMachineInstanceReplicaSetCondition {
	if !paused {
		return removeCondition(conds, v1.VirtualMachineInstanceReplicaSetReplicaPaused)
	}
	return setCondition(conds, v1.VirtualMachineInstanceReplicaSetCondition{
		Type: v1.VirtualMachineInstanceReplicaSetReplicaPaused, Status: corev1.ConditionTrue,
		Reason: ReasonPaused, Message: "Controller got paused",
	}, now)
}

// setCondition puts c into conds in place of one of its type; the
// transition time is kept when the status does not change.
func setCondition(conds []v1.VirtualMachineInstanceReplicaSetCondition, c v1.VirtualMachineInstanceReplicaSetCondition, now time.Time) []v1.VirtualMachineInstanceReplicaSetCondition {
	out := make([]v1.VirtualMachineInstanceReplicaSetCondition, 0, len(conds)+1)
	c.LastTransitionTime = metav1.NewTime(now.Truncate(time.Second))
	placed := false
	for _, old := range conds {
		if old.Type != c.Type {
			out = append(out, old)
			continue
		}
		if old.Status == c.Status {
			c.LastTransitionTime = old.LastTransitionTime
		}
		out = append(out, c)
		placed = true
	}
	if !placed {
		out = append(out, c)
	}
	return out
}

func removeCondition(conds []v1.VirtualMachineInstanceReplicaSetCondition, t v1.VirtualMachineInstanceReplicaSetConditionType) []v1.VirtualMachineInstanceReplicaSetCondition {
	var out []v1.VirtualMachineInstanceReplicaSetCondition
	for _, c := range conds {
		if c.Type != t {
			out = append(out, c)
		}
	}
	return out
}
