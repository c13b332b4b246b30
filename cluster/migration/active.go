package migration

import (
	"fmt"
	"maps"

	"k8s.io/utils/ptr"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// planActive follows a migration from Scheduling to its end; several steps
// may happen in one sync when the agents were quick.
func planActive(o Observed, r Result) Result {
	vmi := o.VMI
	if vmi == nil {
		return r.fail(o, ReasonVMINotFound, fmt.Sprintf("VMI %s/%s disappeared", o.VMIM.Namespace, o.VMIM.Spec.VMIName))
	}
	ms := ours(o)
	switch {
	case ms != nil && ms.Failed:
		return r.fail(o, ReasonMigrationFailed, failureMessage(ms))
	case ms != nil && ms.Completed && ms.TargetNodeDomainDetected:
		return r.succeed(o)
	case ms != nil && ms.Completed:
		if reason, msg := targetLostAfterCompletion(o); reason != "" {
			return r.fail(o, reason, msg)
		}
		r.mirror(o) // the source is done; the target reports its domain next
		return r
	case vmi.DeletionTimestamp != nil || vmi.Status.Phase != v1.Running:
		return r.fail(o, ReasonVMINotRunning, fmt.Sprintf("VMI %s stopped running (phase %q)", vmi.Name, vmi.Status.Phase))
	}
	if reason, msg, after := targetPodProblem(o); reason != "" {
		return r.fail(o, reason, msg)
	} else if after > 0 {
		r.RequeueAfter = after
		return r
	}
	if r.Status.Phase == v1.MigrationScheduling {
		r.setPhase(v1.MigrationScheduled, o.Now)
	}
	if msg, after := targetReadyOverdue(o, r.Status, ms); msg != "" {
		return r.fail(o, ReasonTargetNotReady, msg)
	} else if after > 0 {
		r.RequeueAfter = after
	}
	if r.Status.Phase == v1.MigrationScheduled || (r.Status.Phase == v1.MigrationPreparingTarget && ms == nil) {
		r.prepare(o)
		r.setPhase(v1.MigrationPreparingTarget, o.Now)
		return r
	}
	if ms == nil {
		return r
	}
	if r.Status.Phase == v1.MigrationPreparingTarget && ms.TargetNodeAddress != "" && ms.TargetNodeDomainReadyTimestamp != nil {
		r.setPhase(v1.MigrationTargetReady, o.Now)
	}
	if r.Status.Phase == v1.MigrationTargetReady && ms.StartTimestamp != nil {
		r.setPhase(v1.MigrationRunning, o.Now)
	}
	r.mirror(o)
	return r
}

// planDeletion: a VMIM deleted before its migration started fails at once;
// one deleted while it runs asks the source agent to abort and waits for
// the outcome (a migration that completed anyway stands). Once final, the
// finalizer goes.
func planDeletion(o Observed, r Result) Result {
	if !hasFinalizer(o.VMIM) {
		return r
	}
	if isFinal(r.Status.Phase) {
		r = planFinal(o, r)
		r.RemoveFinalizer = true
		return r
	}
	ms := ours(o)
	var lostReason, lostMsg string
	if ms != nil && ms.Completed {
		lostReason, lostMsg = targetLostAfterCompletion(o)
	}
	switch {
	case ms != nil && ms.Completed && ms.TargetNodeDomainDetected:
		return r.succeed(o)
	case ms != nil && ms.Failed:
		return r.fail(o, ReasonAborted, failureMessage(ms))
	case lostReason != "":
		return r.fail(o, lostReason, lostMsg)
	case ms != nil && ms.StartTimestamp != nil && o.VMI.Status.Phase == v1.Running:
		r.vmiStatus(o).MigrationState.AbortRequested = true
		r.setCondition(ConditionAbortRequested, ReasonAborted, "the migration was deleted while running; the source was asked to abort", o.Now)
		r.mirror(o)
		return r
	}
	return r.fail(o, ReasonAborted, "the migration was deleted before it started")
}

// targetLostAfterCompletion says why a migration whose source completed
// fails before the target reported its domain: the target pod was deleted
// or ended. The guest's state left the source QEMU (postmigrate) and the
// target may have run it, so neither side can carry on: the migration
// fails, and the source agent, which sees the VMI left on its node
// without the target label, fails the VMI (KubeVirt's outcome too).
func targetLostAfterCompletion(o Observed) (reason, msg string) {
	reason, msg, _ = targetPodProblem(o)
	if reason != ReasonTargetPodDeleted && reason != ReasonTargetPodFailed {
		return "", ""
	}
	return reason, msg + " after the source completed the transfer: the guest is lost with it"
}

// prepare names the migration on the VMI: a fresh migrationState (an
// earlier migration's is removed first), the target pod among the active
// pods, and the target node label so the target agent sees the VMI.
func (r *Result) prepare(o Observed) {
	vmi, pod := o.VMI, o.TargetPod
	r.ResetMigrationState = vmi.Status.MigrationState != nil && vmi.Status.MigrationState.MigrationUID != o.VMIM.UID
	st := r.vmiStatus(o)
	conf := o.Migration.DeepCopy()
	st.MigrationState = &v1.VirtualMachineInstanceMigrationState{
		MigrationUID: o.VMIM.UID, SourceNode: vmi.Status.NodeName, TargetNode: pod.Spec.NodeName,
		TargetPod: pod.Name, MigrationConfiguration: conf,
	}
	if o.SourcePod != nil {
		st.MigrationState.SourcePod = o.SourcePod.Name
	}
	st.ActivePods = maps.Clone(st.ActivePods)
	if st.ActivePods == nil {
		st.ActivePods = map[string]string{}
	}
	st.ActivePods[string(pod.UID)] = pod.Spec.NodeName
	r.label(v1.MigrationTargetNodeNameLabel, ptr.To(pod.Spec.NodeName))
	r.Status.MigrationState = st.MigrationState.DeepCopy()
}

// succeed hands the VMI over to the target node and ends the migration.
func (r *Result) succeed(o Observed) Result {
	ms := ours(o)
	st := r.vmiStatus(o)
	st.NodeName = ms.TargetNode
	if st.EvacuationNodeName == ms.SourceNode {
		st.EvacuationNodeName = ""
	}
	active := map[string]string{}
	for uid, node := range st.ActivePods {
		if node == ms.TargetNode {
			active[uid] = node
		}
	}
	st.ActivePods = active
	if o.VMI.Labels[v1.NodeNameLabel] != ms.TargetNode {
		r.label(v1.NodeNameLabel, ptr.To(ms.TargetNode))
	}
	if _, ok := o.VMI.Labels[v1.MigrationTargetNodeNameLabel]; ok {
		r.label(v1.MigrationTargetNodeNameLabel, nil)
	}
	r.dropCondition(ConditionWaiting)
	r.setPhase(v1.MigrationSucceeded, o.Now)
	r.mirror(o)
	return *r
}

// fail ends the migration with reason; a migration the agents already
// know of is also aborted on the VMI, so the source never starts it.
func (r *Result) fail(o Observed, reason, msg string) Result {
	if ms := ours(o); ms != nil && !ms.Failed && !ms.Completed {
		r.vmiStatus(o).MigrationState.AbortRequested = true
	}
	r.dropCondition(ConditionWaiting)
	r.setCondition(ConditionFailed, reason, msg, o.Now)
	r.setPhase(v1.MigrationFailed, o.Now)
	r.cleanup(o)
	r.mirror(o)
	return *r
}

// cleanup of a failed migration: the target pod is deleted, the target
// label and the target pod's activePods entry removed from the VMI.
func (r *Result) cleanup(o Observed) {
	if p := o.TargetPod; p != nil && p.DeletionTimestamp == nil {
		r.DeleteTargetPod = true
	}
	ms := ours(o)
	if ms == nil {
		return
	}
	if _, ok := o.VMI.Labels[v1.MigrationTargetNodeNameLabel]; ok {
		r.label(v1.MigrationTargetNodeNameLabel, nil)
	}
	for uid, node := range o.VMI.Status.ActivePods {
		if node == ms.TargetNode && node != o.VMI.Status.NodeName {
			st := r.vmiStatus(o)
			st.ActivePods = maps.Clone(st.ActivePods)
			delete(st.ActivePods, uid)
		}
	}
}

// mirror copies this migration's VMI migrationState into the VMIM status.
func (r *Result) mirror(o Observed) {
	ms := ours(o)
	if r.VMIStatus != nil && r.VMIStatus.MigrationState != nil && r.VMIStatus.MigrationState.MigrationUID == o.VMIM.UID {
		ms = r.VMIStatus.MigrationState
	}
	if ms != nil {
		r.Status.MigrationState = ms.DeepCopy()
	}
}

// vmiStatus is the VMI status the result writes, started from the VMI's.
func (r *Result) vmiStatus(o Observed) *v1.VirtualMachineInstanceStatus {
	if r.VMIStatus == nil {
		r.VMIStatus = o.VMI.Status.DeepCopy()
	}
	return r.VMIStatus
}

func failureMessage(ms *v1.VirtualMachineInstanceMigrationState) string {
	if ms.FailureReason != "" {
		return ms.FailureReason
	}
	if ms.AbortStatus == v1.MigrationAbortSucceeded {
		return "the migration was aborted"
	}
	return "the source reported the migration failed"
}
