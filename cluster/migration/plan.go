package migration

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// Reasons of a failed migration (the VMIM's Failed condition).
const (
	ReasonVMINotFound       = "VMINotFound"
	ReasonVMINotRunning     = "VMINotRunning"
	ReasonNotLiveMigratable = "NotLiveMigratable"
	ReasonTargetPodDeleted  = "TargetPodDeleted"
	ReasonTargetPodFailed   = "TargetPodFailed"
	ReasonUnschedulable     = "TargetPodUnschedulable"
	ReasonPendingTimeout    = "TargetPodPendingTimeout"
	ReasonTargetNotReady    = "TargetNotReady"
	ReasonMigrationFailed   = "MigrationFailed"
	ReasonAborted           = "MigrationAborted"
)

// Condition types of a VMIM.
const (
	// ConditionFailed (True) says why the migration failed.
	ConditionFailed = "Failed"
	// ConditionAbortRequested (KubeVirt's spelling): the VMIM was deleted
	// while the migration ran; the source agent was asked to cancel.
	ConditionAbortRequested = "migrationAbortRequested"
	// ConditionWaiting (True) says why a Pending migration waits.
	ConditionWaiting = "Waiting"
)

// waitRetry is how soon a waiting migration is looked at again.
const waitRetry = 2 * time.Second

// vmiStartWait is how long after its creation a migration waits for a VMI
// that is still starting (Pending, Scheduling, Scheduled) before it fails:
// a VMIM created just as its VMI turns Running must not lose the race with
// the controller's view of that VMI.
const vmiStartWait = time.Minute

// Observed is what a VMIM sync sees.
type Observed struct {
	VMIM *v1.VirtualMachineInstanceMigration
	// VMI is the VMI to migrate (nil: not found).
	VMI *v1.VirtualMachineInstance
	// SourcePod is the VMI's current launcher pod (nil: none).
	SourcePod *corev1.Pod
	// TargetPod is this migration's target pod (nil: none).
	TargetPod *corev1.Pod
	// Wait is why a Pending migration may not start yet ("" = it may).
	Wait string
	// Migration is the configuration the migration runs with (defaults,
	// cluster and policy merged).
	Migration v1.MigrationConfiguration
	// UnschedulableTimeout and PendingTimeout bound the target pod's start.
	UnschedulableTimeout, PendingTimeout time.Duration
	Now                                  time.Time
}

// Result is what a VMIM sync should do, in this order: finalizer, target
// pod, VMI labels, VMI status, VMIM status.
type Result struct {
	AddFinalizer    bool
	RemoveFinalizer bool
	CreateTargetPod bool
	DeleteTargetPod bool
	// ResetMigrationState removes the VMI's migrationState of an earlier
	// migration before VMIStatus writes this one's.
	ResetMigrationState bool
	// VMILabels are label changes on the VMI (nil value: remove).
	VMILabels map[string]*string
	// VMIStatus, if set, is the VMI status whose migration controller
	// fields are applied.
	VMIStatus *v1.VirtualMachineInstanceStatus
	// Status is the VMIM status (written only if it changed).
	Status v1.VirtualMachineInstanceMigrationStatus
	// RequeueAfter asks for another look (0: none).
	RequeueAfter time.Duration
}

// Plan decides a VMIM sync. It is pure.
func Plan(o Observed) Result {
	m := o.VMIM
	r := Result{Status: *m.Status.DeepCopy()}
	if m.DeletionTimestamp != nil {
		return planDeletion(o, r)
	}
	if isFinal(m.Status.Phase) {
		return planFinal(o, r)
	}
	r.AddFinalizer = !hasFinalizer(m)
	if m.Status.Phase == v1.MigrationPhaseUnset {
		r.setPhase(v1.MigrationPending, o.Now)
	}
	if r.Status.Phase == v1.MigrationPending {
		return planPending(o, r)
	}
	return planActive(o, r)
}

// planPending checks the VMI can migrate, waits for a slot, then creates
// the target pod.
func planPending(o Observed, r Result) Result {
	vmi := o.VMI
	switch {
	case vmi == nil:
		return r.fail(o, ReasonVMINotFound, fmt.Sprintf("VMI %s/%s does not exist", o.VMIM.Namespace, o.VMIM.Spec.VMIName))
	case vmi.DeletionTimestamp == nil && starting(vmi.Status.Phase) && o.Now.Sub(o.VMIM.CreationTimestamp.Time) < vmiStartWait:
		r.setCondition(ConditionWaiting, "Waiting", fmt.Sprintf("VMI %s is not running yet (phase %q)", vmi.Name, vmi.Status.Phase), o.Now)
		r.RequeueAfter = waitRetry
		return r
	case vmi.DeletionTimestamp != nil || vmi.Status.Phase != v1.Running:
		return r.fail(o, ReasonVMINotRunning, fmt.Sprintf("VMI %s is not running (phase %q)", vmi.Name, vmi.Status.Phase))
	}
	if ok, reason, msg := liveMigratable(vmi); !ok {
		return r.fail(o, reason, msg)
	}
	if o.Wait == "" && o.SourcePod == nil {
		o.Wait = "the VMI's launcher pod is not in the cache yet"
	}
	if o.Wait != "" {
		r.setCondition(ConditionWaiting, "Waiting", o.Wait, o.Now)
		r.RequeueAfter = waitRetry
		return r
	}
	r.dropCondition(ConditionWaiting)
	r.CreateTargetPod = true
	r.setPhase(v1.MigrationScheduling, o.Now)
	return r
}

// starting reports a VMI phase before Running.
func starting(p v1.VirtualMachineInstancePhase) bool {
	return p == v1.VmPhaseUnset || p == v1.Pending || p == v1.Scheduling || p == v1.Scheduled
}

// liveMigratable reads the VMI's LiveMigratable condition.
func liveMigratable(vmi *v1.VirtualMachineInstance) (bool, string, string) {
	for _, c := range vmi.Status.Conditions {
		if c.Type != v1.VirtualMachineInstanceIsMigratable {
			continue
		}
		if c.Status == corev1.ConditionTrue {
			return true, "", ""
		}
		reason := c.Reason
		if reason == "" {
			reason = ReasonNotLiveMigratable
		}
		msg := c.Message
		if msg == "" {
			msg = fmt.Sprintf("VMI %s is not live migratable", vmi.Name)
		}
		return false, reason, msg
	}
	return false, ReasonNotLiveMigratable, fmt.Sprintf("VMI %s has no LiveMigratable condition", vmi.Name)
}

// planFinal: a failed migration's target pod and target label go; the
// VMIM's migrationState keeps mirroring the VMI's while it is this one's.
func planFinal(o Observed, r Result) Result {
	r.mirror(o)
	if r.Status.Phase == v1.MigrationFailed {
		r.cleanup(o)
	}
	return r
}

// ours is the VMI's migrationState if it belongs to this migration.
func ours(o Observed) *v1.VirtualMachineInstanceMigrationState {
	if o.VMI == nil || o.VMI.Status.MigrationState == nil || o.VMI.Status.MigrationState.MigrationUID != o.VMIM.UID {
		return nil
	}
	return o.VMI.Status.MigrationState
}

func hasFinalizer(m *v1.VirtualMachineInstanceMigration) bool {
	for _, f := range m.Finalizers {
		if f == v1.MigrationFinalizer {
			return true
		}
	}
	return false
}

// setPhase moves the phase along the table, recording the transition.
func (r *Result) setPhase(p v1.VirtualMachineInstanceMigrationPhase, now time.Time) {
	if r.Status.Phase == p || !canTransition(r.Status.Phase, p) {
		return
	}
	r.Status.Phase = p
	r.Status.PhaseTransitionTimestamps = append(r.Status.PhaseTransitionTimestamps, v1.VirtualMachineInstanceMigrationPhaseTransitionTimestamp{
		Phase: p, PhaseTransitionTimestamp: metav1.NewTime(now.Truncate(time.Second)),
	})
}

// setCondition sets a True condition, keeping its transition time when
// nothing changed.
func (r *Result) setCondition(t, reason, msg string, now time.Time) {
	for i, c := range r.Status.Conditions {
		if c.Type == t {
			if c.Status != corev1.ConditionTrue || c.Reason != reason {
				c.LastTransitionTime = metav1.NewTime(now.Truncate(time.Second))
			}
			c.Status, c.Reason, c.Message = corev1.ConditionTrue, reason, msg
			r.Status.Conditions[i] = c
			return
		}
	}
	r.Status.Conditions = append(r.Status.Conditions, v1.VirtualMachineInstanceMigrationCondition{
		Type: t, Status: corev1.ConditionTrue, Reason: reason, Message: msg,
		LastTransitionTime: metav1.NewTime(now.Truncate(time.Second)),
	})
}

func (r *Result) dropCondition(t string) {
	var out []v1.VirtualMachineInstanceMigrationCondition
	for _, c := range r.Status.Conditions {
		if c.Type != t {
			out = append(out, c)
		}
	}
	r.Status.Conditions = out
}

// label records a VMI label change.
func (r *Result) label(key string, value *string) {
	if r.VMILabels == nil {
		r.VMILabels = map[string]*string{}
	}
	r.VMILabels[key] = value
}
