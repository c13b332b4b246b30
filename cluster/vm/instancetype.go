package vm

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// Instancetypes resolves a VM's spec.instancetype and spec.preference
// (cluster/instancetype implements it).
type Instancetypes interface {
	// Store returns the VM's status.instancetypeRef and
	// status.preferenceRef, capturing the named objects in
	// ControllerRevisions if need be. It does not modify vm.
	Store(ctx context.Context, vm *v1.VirtualMachine) (it, pref *v1.InstancetypeStatusRef, err error)
	// Expand returns the VMI template expanded from the revisions vm's
	// status refs name.
	Expand(ctx context.Context, vm *v1.VirtualMachine) (*v1.VirtualMachineInstanceTemplateSpec, error)
}

// Failure condition reasons for instancetypes and preferences: the named
// object is missing (retried every InstancetypeRetry), or the VM cannot
// use it (a conflict, an unknown kind: waits for the VM to change).
const (
	ReasonFailedFindInstancetype = "FailedFindInstancetype"
	ReasonFailedInstancetype     = "FailedInstancetype"
)

// InstancetypeRetry is how soon a VM whose instancetype or preference is
// missing is synced again.
const InstancetypeRetry = 15 * time.Second

// usesInstancetype reports whether vm names an instancetype or preference
// or still records one.
func usesInstancetype(vm *v1.VirtualMachine) bool {
	return vm.Spec.Instancetype != nil || vm.Spec.Preference != nil ||
		vm.Status.InstancetypeRef != nil || vm.Status.PreferenceRef != nil
}

// storeInstancetypes resolves the VM's status refs into status. On error
// the refs stay as they were and the error says why no VMI may be created.
func (c *Controller) storeInstancetypes(ctx context.Context, vm *v1.VirtualMachine, status *v1.VirtualMachineStatus) error {
	if c.d.Instancetypes == nil || !usesInstancetype(vm) {
		return nil
	}
	it, pref, err := c.d.Instancetypes.Store(ctx, vm)
	if err != nil {
		return err
	}
	status.InstancetypeRef, status.PreferenceRef = it, pref
	return nil
}

// instancetypes resolves the VM's instancetype and preference into
// res.Status and reports a problem as the Failure condition (with an event
// when it first appears), or clears that condition. While there is a
// problem no VMI is created: a missing object is retried every
// InstancetypeRetry, a permanent one (conflict, unknown kind) waits for
// the VM to change. Other errors (the API server) are returned.
func (c *Controller) instancetypes(ctx context.Context, vm *v1.VirtualMachine, res *Result, now time.Time) error {
	err := c.storeInstancetypes(ctx, vm, &res.Status)
	if err == nil {
		res.Status.Conditions = dropFailureReasons(res.Status.Conditions, ReasonFailedFindInstancetype, ReasonFailedInstancetype)
		return nil
	}
	var p interface{ Permanent() bool }
	if !errors.As(err, &p) {
		return err
	}
	reason := ReasonFailedInstancetype
	if !p.Permanent() {
		reason = ReasonFailedFindInstancetype
		if res.RequeueAfter == 0 || res.RequeueAfter > InstancetypeRetry {
			res.RequeueAfter = InstancetypeRetry
		}
	}
	if !hasFailureWith(vm.Status.Conditions, reason, err.Error()) {
		c.d.Recorder.Eventf(vm, corev1.EventTypeWarning, reason, "%v", err)
	}
	res.Status.Conditions = setFailure(res.Status.Conditions, reason, err, now)
	if res.Action == CreateVMI {
		res.Action = None
		res.Status.StateChangeRequests = vm.Status.StateChangeRequests // a Start waits
	}
	return nil
}

func hasFailureWith(conds []v1.VirtualMachineCondition, reason, msg string) bool {
	for _, c := range conds {
		if c.Type == v1.VirtualMachineFailure && c.Status == corev1.ConditionTrue && c.Reason == reason && c.Message == msg {
			return true
		}
	}
	return false
}

func dropFailureReasons(conds []v1.VirtualMachineCondition, reasons ...string) []v1.VirtualMachineCondition {
	var out []v1.VirtualMachineCondition
	for _, c := range conds {
		drop := false
		for _, r := range reasons {
			drop = drop || (c.Type == v1.VirtualMachineFailure && c.Reason == r)
		}
		if !drop {
			out = append(out, c)
		}
	}
	return out
}

// expandVMI applies the instancetype and preference to vmi, from the
// revisions status records.
func (c *Controller) expandVMI(ctx context.Context, vm *v1.VirtualMachine, status v1.VirtualMachineStatus, vmi *v1.VirtualMachineInstance) error {
	if c.d.Instancetypes == nil || (vm.Spec.Instancetype == nil && vm.Spec.Preference == nil) {
		return nil
	}
	withRefs := vm.DeepCopy()
	withRefs.Status.InstancetypeRef, withRefs.Status.PreferenceRef = status.InstancetypeRef, status.PreferenceRef
	t, err := c.d.Instancetypes.Expand(ctx, withRefs)
	if err != nil {
		return err
	}
	vmi.Labels, vmi.Annotations, vmi.Spec = t.ObjectMeta.Labels, t.ObjectMeta.Annotations, t.Spec
	return nil
}
