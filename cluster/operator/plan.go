package operator

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// Finalizer holds a KubeVirt resource until its components are removed
// (KubeVirt's spelling).
const Finalizer = "foregroundDeleteKubeVirt"

// Condition types and reasons of the KubeVirt resource.
const (
	ConditionAvailable   = "Available"
	ConditionProgressing = "Progressing"
	ConditionDegraded    = "Degraded"

	ReasonAllComponentsReady    = "AllComponentsReady"
	ReasonRolledOut             = "RolledOut"
	ReasonDeploying             = "DeploymentInProgress"
	ReasonUpdating              = "UpdateInProgress"
	ReasonComponentsUnready     = "ComponentsNotReady"
	ReasonDeleting              = "DeletionInProgress"
	ReasonDeletionBlocked       = "DeletionBlockedByWorkloads"
	ReasonRemovingWorkloads     = "RemovingWorkloads"
	ReasonComponentsUnavailable = "ComponentsUnavailable"
	ReasonInvalidSpec           = "InvalidSpec"
)

// recheck is how soon a deletion under way is looked at again (the
// operator does not watch every kind it removes).
const recheck = 2 * time.Second

// Workload is the observed state of one of the components' Deployments
// and DaemonSets.
type Workload struct {
	Kind, Name string
	// Found: the object exists.
	Found bool
	// Updated: it is the target version's and its controller rolled every
	// pod to it.
	Updated bool
	// Available: every pod it wants is available.
	Available bool
	// Status is a short account ("1/2 available"), for messages.
	Status string
}

// Observed is what Plan decides from.
type Observed struct {
	KubeVirt        *v1.KubeVirt
	Target          Images
	OperatorVersion string
	// Workloads are the rendered Deployments and DaemonSets as observed.
	Workloads []Workload
	// VMs and VMIs count the cluster's workloads (a deletion waits for
	// them or removes them).
	VMs, VMIs int
	// Remaining counts the removable objects still present (observed only
	// while deleting).
	Remaining int
	// Invalid says why the spec cannot be rendered (a customizeComponents
	// patch that does not apply); "" when it can.
	Invalid string
	Now     time.Time
}

// Result is what the sync does.
type Result struct {
	AddFinalizer, RemoveFinalizer bool
	// Apply the rendered objects (server-side apply).
	Apply bool
	// DeleteWorkloads deletes every VM and VMI (uninstallStrategy
	// RemoveWorkloads).
	DeleteWorkloads bool
	// DeleteComponents deletes the removable objects, in reverse order.
	DeleteComponents bool
	Status           v1.KubeVirtStatus
	Requeue          time.Duration
	// workloads are the observed ones, for the decision to re-apply.
	workloads []Workload
}

// Plan decides one sync of a KubeVirt resource. It is pure.
func Plan(o Observed) Result {
	kv := o.KubeVirt
	r := Result{Status: *kv.Status.DeepCopy()}
	r.Status.OperatorVersion = o.OperatorVersion
	if kv.DeletionTimestamp != nil {
		return planDeletion(o, r)
	}
	r = planInstall(o, r)
	if o.Invalid != "" {
		// Nothing is applied until the spec renders; what runs stays.
		r.Apply = false
		r.setCondition(o.Now, ConditionDegraded, true, ReasonInvalidSpec, o.Invalid)
	}
	return r
}

// planInstall applies the components and reports their roll-out.
func planInstall(o Observed, r Result) Result {
	kv := o.KubeVirt
	r.AddFinalizer = !slices.Contains(kv.Finalizers, Finalizer)
	r.Apply, r.workloads = true, o.Workloads
	r.Status.TargetKubeVirtVersion = o.Target.Tag
	r.Status.TargetKubeVirtRegistry = o.Target.Registry
	r.Status.ObservedGeneration = &kv.Generation

	var notRolled, unavailable, broken []string
	for _, w := range o.Workloads {
		id := strings.ToLower(w.Kind) + "/" + w.Name
		switch {
		case !w.Found:
			notRolled = append(notRolled, id+" (not created yet)")
			unavailable = append(unavailable, id)
		case !w.Updated:
			notRolled = append(notRolled, id+" ("+w.Status+")")
		}
		if w.Found && !w.Available {
			unavailable = append(unavailable, id+" ("+w.Status+")")
			if w.Updated {
				broken = append(broken, id+" ("+w.Status+")")
			}
		}
	}
	deployedBefore := r.Status.ObservedKubeVirtVersion != ""
	switch {
	case len(notRolled) == 0 && len(unavailable) == 0:
		r.Status.Phase = v1.KubeVirtPhaseDeployed
		r.Status.ObservedKubeVirtVersion = o.Target.Tag
		r.Status.ObservedKubeVirtRegistry = o.Target.Registry
		msg := "All components are ready."
		r.setCondition(o.Now, ConditionAvailable, true, ReasonAllComponentsReady, msg)
		r.setCondition(o.Now, ConditionProgressing, false, ReasonAllComponentsReady, msg)
		r.setCondition(o.Now, ConditionDegraded, false, ReasonAllComponentsReady, msg)
		return r
	case deployedBefore:
		r.Status.Phase = v1.KubeVirtPhaseDeployed // KubeVirt keeps Deployed while it updates
	default:
		r.Status.Phase = v1.KubeVirtPhaseDeploying
	}
	reason := ReasonDeploying
	if deployedBefore && r.Status.ObservedKubeVirtVersion != o.Target.Tag {
		reason = ReasonUpdating
	}
	if len(notRolled) > 0 {
		r.setCondition(o.Now, ConditionProgressing, true, reason,
			fmt.Sprintf("Rolling out %s %s: %s.", o.Target.Registry, o.Target.Tag, strings.Join(notRolled, ", ")))
	} else {
		r.setCondition(o.Now, ConditionProgressing, false, ReasonRolledOut, "Every component runs the target version.")
	}
	if len(unavailable) > 0 {
		r.setCondition(o.Now, ConditionAvailable, false, ReasonComponentsUnready, "Not available: "+strings.Join(unavailable, ", ")+".")
	} else {
		r.setCondition(o.Now, ConditionAvailable, true, ReasonAllComponentsReady, "Every component is available.")
	}
	if len(broken) > 0 {
		r.setCondition(o.Now, ConditionDegraded, true, ReasonComponentsUnavailable,
			"Rolled out but not available: "+strings.Join(broken, ", ")+".")
	} else {
		r.setCondition(o.Now, ConditionDegraded, false, reason, "No component failed.")
	}
	return r
}

// planDeletion removes the components once no VM or VMI is left, or
// removes those first when the uninstall strategy says so. The CRDs stay.
func planDeletion(o Observed, r Result) Result {
	if !slices.Contains(o.KubeVirt.Finalizers, Finalizer) {
		return r
	}
	r.Status.Phase = v1.KubeVirtPhaseDeleting
	r.setCondition(o.Now, ConditionAvailable, false, ReasonDeleting, "The components are being removed.")
	r.setCondition(o.Now, ConditionProgressing, true, ReasonDeleting, "The components are being removed.")
	if n := o.VMs + o.VMIs; n > 0 {
		r.Requeue = recheck
		what := fmt.Sprintf("%d VirtualMachines and %d VirtualMachineInstances exist", o.VMs, o.VMIs)
		if o.KubeVirt.Spec.UninstallStrategy == v1.KubeVirtUninstallStrategyRemoveWorkloads {
			r.DeleteWorkloads = true
			r.setCondition(o.Now, ConditionDegraded, false, ReasonRemovingWorkloads,
				what+": uninstallStrategy RemoveWorkloads deletes them before the components.")
			return r
		}
		r.setCondition(o.Now, ConditionDegraded, true, ReasonDeletionBlocked,
			what+": the components stay until they are deleted (or spec.uninstallStrategy is RemoveWorkloads).")
		return r
	}
	r.setCondition(o.Now, ConditionDegraded, false, ReasonDeleting, "No workloads left.")
	if o.Remaining > 0 {
		r.DeleteComponents = true
		r.Requeue = recheck
		return r
	}
	r.Status.Phase = v1.KubeVirtPhaseDeleted
	r.setCondition(o.Now, ConditionProgressing, false, ReasonDeleting, "The components are removed; the CRDs stay.")
	r.RemoveFinalizer = true
	return r
}

// setCondition sets condition typ, keeping its transition time when the
// status does not change.
func (r *Result) setCondition(now time.Time, typ string, status bool, reason, msg string) {
	s := corev1.ConditionFalse
	if status {
		s = corev1.ConditionTrue
	}
	c := v1.KubeVirtCondition{Type: typ, Status: s, Reason: reason, Message: msg,
		LastProbeTime: metav1.NewTime(now), LastTransitionTime: metav1.NewTime(now)}
	for i := range r.Status.Conditions {
		old := &r.Status.Conditions[i]
		if old.Type != typ {
			continue
		}
		if old.Status == s {
			c.LastTransitionTime = old.LastTransitionTime
			c.LastProbeTime = old.LastProbeTime
		}
		*old = c
		return
	}
	r.Status.Conditions = append(r.Status.Conditions, c)
}
