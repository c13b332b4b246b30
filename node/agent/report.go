package agent

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/node/status"
)

// report derives the agent's status fields and patches them when they
// changed (a prelaunching VMI: once it can be taken over as Running,
// prelaunch.go), then records the events of a phase change, and the phase
// in the record (recordphase.go).
func (a *Agent) report(ctx context.Context, o *Observation) error {
	f, ok := facts(o)
	if !ok {
		return a.recordAPIPhase(ctx, o)
	}
	d := a.domainIfAny(o.UID)
	if d != nil {
		f.GuestOSInfo = d.guestOSInfo()
		f.Interfaces = mergeGuestNet(f.Interfaces, d.guestInterfaces(), masqueraded(o.Record), o.VMI.Status.Interfaces)
	}
	cur := o.VMI.Status
	from := cur
	if prelaunching(o) {
		// The takeover (prelaunch.go): written once the domain runs.
		from = takeoverStatus(cur, o.Pod, o.Node, f.Now)
	}
	next, events := status.Derive(from, f)
	if equality.Semantic.DeepEqual(cur, next) || (prelaunching(o) && next.Phase != v1.Running) {
		return a.recordAPIPhase(ctx, o)
	}
	if d != nil && d.alreadyWrote(o.VMI.ResourceVersion, next) {
		return nil // the cache is behind this agent's own write (statusmemo.go)
	}
	if err := a.patchStatus(ctx, o.VMI, next); err != nil {
		return err
	}
	if d != nil {
		d.wrote(o.VMI.ResourceVersion, next)
	}
	a.log.Info("status patched", "vmi", o.name(), "uid", o.UID, "phase", next.Phase, "was", cur.Phase,
		"domain", f.Domain, "reason", f.Reason)
	for _, e := range events {
		if e.Warning {
			a.warn(o.VMI, e.Reason, e.Message)
		} else {
			a.normal(o.VMI, e.Reason, e.Message)
		}
	}
	return a.recordPhase(ctx, o, next.Phase, f.Reason, f.Now)
}

func (a *Agent) domainIfAny(uid string) *domain {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.domains[uid]
}

// patchStatus writes the fields the agent owns (v1.StatusOwnership) by
// server-side apply under the field manager nodevirt-agent: conditions and
// transition timestamps are merged by key, so other writers' entries stay;
// an agent condition left out of s (Paused after an unpause) is removed.
// The body carries the VMI's resourceVersion as a precondition: a conflict
// means the cache was stale, and the sync is retried with a fresh view.
func (a *Agent) patchStatus(ctx context.Context, vmi *v1.VirtualMachineInstance, s v1.VirtualMachineInstanceStatus) error {
	ctx, cancel := context.WithTimeout(ctx, a.cfg.CallTimeout)
	defer cancel()
	vmi, err := a.upgradeManagedFields(ctx, vmi)
	if err != nil {
		return err
	}
	return v1.ApplyStatus(ctx, statusPatcher(a.deps.Virt, vmi.Namespace), vmi, s, v1.ManagerAgent)
}

// upgradeManagedFields hands the status fields an agent of an earlier
// release wrote by merge patch to the agent's apply entry, once per VMI
// (v1.StatusApplyUpgrade), and returns the VMI as it is afterwards; a VMI
// with nothing to hand over is returned as it is.
func (a *Agent) upgradeManagedFields(ctx context.Context, vmi *v1.VirtualMachineInstance) (*v1.VirtualMachineInstance, error) {
	patch, err := v1.StatusApplyUpgrade(vmi, v1.ManagerAgent)
	if err != nil || patch == nil {
		return vmi, err
	}
	up, err := a.deps.Virt.KubevirtV1().VirtualMachineInstances(vmi.Namespace).
		Patch(ctx, vmi.Name, types.JSONPatchType, patch, metav1.PatchOptions{FieldManager: v1.ManagerAgent})
	if err != nil {
		return nil, fmt.Errorf("upgrade managed fields of VMI %s/%s: %w", vmi.Namespace, vmi.Name, err)
	}
	return up, nil
}

// removeFinalizer drops the agent's finalizer; a JSON patch with a test of
// the current list makes it safe against concurrent finalizer changes.
func (a *Agent) removeFinalizer(ctx context.Context, o *Observation) error {
	vmi := o.VMI
	var keep []string
	for _, f := range vmi.Finalizers {
		if f != v1.VirtualMachineInstanceFinalizer {
			keep = append(keep, f)
		}
	}
	if keep == nil {
		keep = []string{}
	}
	ops := []map[string]any{
		{"op": "test", "path": "/metadata/finalizers", "value": vmi.Finalizers},
		{"op": "replace", "path": "/metadata/finalizers", "value": keep},
	}
	b, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, a.cfg.CallTimeout)
	defer cancel()
	_, err = a.deps.Virt.KubevirtV1().VirtualMachineInstances(vmi.Namespace).
		Patch(ctx, vmi.Name, types.JSONPatchType, b, metav1.PatchOptions{FieldManager: v1.ManagerAgent})
	if apierrors.IsNotFound(err) {
		return nil // already gone: an earlier sync removed the finalizer
	}
	if err != nil {
		return fmt.Errorf("remove finalizer of VMI %s/%s: %w", vmi.Namespace, vmi.Name, err)
	}
	a.normal(vmi, status.ReasonDeleted, "VirtualMachineInstance resources released")
	return nil
}
