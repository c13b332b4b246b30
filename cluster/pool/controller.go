package pool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	poolv1 "github.com/nodevirt/nodevirt/cluster/api/pool/v1alpha1"
	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	kvclient "github.com/nodevirt/nodevirt/cluster/client/clientset/versioned/typed/api/v1"
	poolclient "github.com/nodevirt/nodevirt/cluster/client/clientset/versioned/typed/pool/v1alpha1"
	kvlisters "github.com/nodevirt/nodevirt/cluster/client/listers/api/v1"
	poollisters "github.com/nodevirt/nodevirt/cluster/client/listers/pool/v1alpha1"
	"github.com/nodevirt/nodevirt/cluster/reconcile"
)

// Event and condition reasons, KubeVirt's.
const (
	EventCreated      = "SuccessfulCreate"
	EventFailedCreate = "FailedCreate"
	EventDeleted      = "SuccessfulDelete"
	EventFailedDelete = "FailedDelete"
	EventReleased     = "Released"
	ReasonScaleOut    = "FailedScaleOut"
	ReasonScaleIn     = "FailedScaleIn"
	ReasonUpdate      = "FailedUpdate"
	EventUpdated      = "SuccessfulUpdate"
	ReasonPaused      = "SuccessfulPaused"
	EventResumed      = "SuccessfulResume"
)

const parallelism = 16

// Deps are the pool controller's collaborators.
type Deps struct {
	Pools    poollisters.VirtualMachinePoolLister
	VMs      kvlisters.VirtualMachineLister
	VMIs     kvlisters.VirtualMachineInstanceLister
	VMAPI    kvclient.VirtualMachinesGetter
	VMIAPI   kvclient.VirtualMachineInstancesGetter
	PoolAPI  poolclient.VirtualMachinePoolsGetter
	Recorder record.EventRecorder
	// Now defaults to time.Now.
	Now func() time.Time
}

// Controller syncs VirtualMachinePools. Build it with New.
type Controller struct {
	d      Deps
	expect *reconcile.Expectations
}

// New returns a pool controller.
func New(d Deps) *Controller {
	if d.Now == nil {
		d.Now = time.Now
	}
	return &Controller{d: d, expect: reconcile.NewExpectations(d.Now)}
}

// Sync reconciles the pool named by key (namespace/name).
func (c *Controller) Sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return fmt.Errorf("pool key %q: %w", key, err)
	}
	p, err := c.d.Pools.VirtualMachinePools(ns).Get(name)
	if apierrors.IsNotFound(err) {
		c.expect.Forget(key)
		return nil
	}
	if err != nil {
		return fmt.Errorf("get pool %s: %w", key, err)
	}
	vms, err := c.d.VMs.VirtualMachines(ns).List(labels.Everything())
	if err != nil {
		return fmt.Errorf("list vms of %s: %w", key, err)
	}
	vmis, err := c.d.VMIs.VirtualMachineInstances(ns).List(labels.Everything())
	if err != nil {
		return fmt.Errorf("list vmis of %s: %w", key, err)
	}
	now := c.d.Now()
	res := Plan(Observed{Pool: p, VMs: vms, VMIs: vmis, Settled: c.expect.Settled(key), Now: now, Shuffle: rand.Shuffle})
	actErr := c.apply(ctx, key, p, res)
	status := res.Status
	if reason := failureReason(actErr); reason != "" {
		status.Conditions = setCondition(status.Conditions, poolv1.VirtualMachinePoolCondition{
			Type: poolv1.VirtualMachinePoolReplicaFailure, Status: corev1.ConditionTrue, Reason: reason, Message: actErr.Error(),
		}, now)
	} else if actErr == nil {
		status.Conditions = removeCondition(status.Conditions, poolv1.VirtualMachinePoolReplicaFailure)
	}
	return errors.Join(actErr, c.writeStatus(ctx, p, status))
}

func (c *Controller) apply(ctx context.Context, key string, p *poolv1.VirtualMachinePool, res Result) error {
	var errs []error
	for _, vm := range res.Release {
		errs = append(errs, c.release(ctx, p, vm))
	}
	uids := make([]types.UID, len(res.Delete))
	for i, vm := range res.Delete {
		uids[i] = vm.UID
	}
	c.expect.Expect(key, len(res.Create), uids)
	errs = append(errs, reconcile.Parallel(len(res.Delete), parallelism, func(i int) error { return c.deleteVM(ctx, key, p, res.Delete[i]) }))
	errs = append(errs, reconcile.Parallel(len(res.Create), parallelism, func(i int) error { return c.createVM(ctx, key, p, res.Create[i]) }))
	errs = append(errs, reconcile.Parallel(len(res.Update), parallelism, func(i int) error { return c.updateVM(ctx, p, res.Update[i]) }))
	errs = append(errs, reconcile.Parallel(len(res.Relabel), parallelism, func(i int) error { return c.relabel(ctx, p, res.Relabel[i]) }))
	errs = append(errs, reconcile.Parallel(len(res.Restart), parallelism, func(i int) error { return c.restart(ctx, p, res.Restart[i]) }))
	return errors.Join(errs...)
}

// NewVM renders the pool's VM called name: the template's labels,
// annotations and spec, the current revision label on the VM and in its
// VMI template, and a controller reference that blocks the pool's
// foreground deletion.
func NewVM(p *poolv1.VirtualMachinePool, name string) *v1.VirtualMachine {
	return newVM(p, name, Revision(p))
}

// OwnerRef is the controller reference a pool puts on its VMs.
func OwnerRef(p *poolv1.VirtualMachinePool) metav1.OwnerReference {
	return *metav1.NewControllerRef(p, poolv1.SchemeGroupVersion.WithKind(poolv1.VirtualMachinePoolKind))
}

func (c *Controller) createVM(ctx context.Context, key string, p *poolv1.VirtualMachinePool, name string) error {
	_, err := c.d.VMAPI.VirtualMachines(p.Namespace).Create(ctx, NewVM(p, name), metav1.CreateOptions{FieldManager: v1.ManagerController})
	if err != nil {
		c.expect.Created(key)
		c.d.Recorder.Eventf(p, corev1.EventTypeWarning, EventFailedCreate, "Error creating VirtualMachine %s: %v", name, err)
		return &scaleOutError{fmt.Errorf("create vm %s/%s of pool %s: %w", p.Namespace, name, p.Name, err)}
	}
	c.d.Recorder.Eventf(p, corev1.EventTypeNormal, EventCreated, "Created VirtualMachine %s", name)
	return nil
}

// deleteVM deletes a VM in the foreground (KubeVirt's choice): the VM
// object stays, holding its index, until its VMI is gone.
func (c *Controller) deleteVM(ctx context.Context, key string, p *poolv1.VirtualMachinePool, vm *v1.VirtualMachine) error {
	uid := vm.UID
	fg := metav1.DeletePropagationForeground
	err := c.d.VMAPI.VirtualMachines(vm.Namespace).Delete(ctx, vm.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &uid}, PropagationPolicy: &fg,
	})
	switch {
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		c.expect.Deleted(key, uid)
		return nil
	case err != nil:
		c.expect.Deleted(key, uid)
		c.d.Recorder.Eventf(p, corev1.EventTypeWarning, EventFailedDelete, "Error deleting VirtualMachine %s: %v", vm.Name, err)
		return &scaleInError{fmt.Errorf("delete vm %s/%s of pool %s: %w", vm.Namespace, vm.Name, p.Name, err)}
	}
	c.d.Recorder.Eventf(p, corev1.EventTypeNormal, EventDeleted, "Deleted VirtualMachine %s", vm.Name)
	return nil
}

// updateVM writes vm, a pool VM brought to the current template (its
// resourceVersion guards against a concurrent change).
func (c *Controller) updateVM(ctx context.Context, p *poolv1.VirtualMachinePool, vm *v1.VirtualMachine) error {
	_, err := c.d.VMAPI.VirtualMachines(vm.Namespace).Update(ctx, vm, metav1.UpdateOptions{FieldManager: v1.ManagerController})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		c.d.Recorder.Eventf(p, corev1.EventTypeWarning, ReasonUpdate, "Error updating VirtualMachine %s: %v", vm.Name, err)
		return &updateError{fmt.Errorf("update vm %s/%s of pool %s: %w", vm.Namespace, vm.Name, p.Name, err)}
	}
	c.d.Recorder.Eventf(p, corev1.EventTypeNormal, EventUpdated, "Updated VirtualMachine %s to revision %s", vm.Name, vm.Labels[v1.VirtualMachinePoolRevisionName])
	return nil
}

// restart deletes the VMI of an up-to-date VM that runs an older
// template; the VM's run strategy starts one from the current template.
func (c *Controller) restart(ctx context.Context, p *poolv1.VirtualMachinePool, vmi *v1.VirtualMachineInstance) error {
	uid := vmi.UID
	err := c.d.VMIAPI.VirtualMachineInstances(vmi.Namespace).Delete(ctx, vmi.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	switch {
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		return nil
	case err != nil:
		c.d.Recorder.Eventf(p, corev1.EventTypeWarning, ReasonUpdate, "Error restarting VirtualMachineInstance %s: %v", vmi.Name, err)
		return &updateError{fmt.Errorf("restart vmi %s/%s of pool %s: %w", vmi.Namespace, vmi.Name, p.Name, err)}
	}
	c.d.Recorder.Eventf(p, corev1.EventTypeNormal, EventUpdated, "Restarted VirtualMachineInstance %s: it ran revision %s", vmi.Name, vmi.Labels[v1.VirtualMachinePoolRevisionName])
	return nil
}

// relabel sets a VMI's revision label (a merge patch guarded by its UID).
func (c *Controller) relabel(ctx context.Context, p *poolv1.VirtualMachinePool, l RevisionLabel) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid": l.VMI.UID, "labels": map[string]string{v1.VirtualMachinePoolRevisionName: l.Revision},
	}})
	if err != nil {
		return err
	}
	_, err = c.d.VMIAPI.VirtualMachineInstances(l.VMI.Namespace).Patch(ctx, l.VMI.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: v1.ManagerController})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return &updateError{fmt.Errorf("label vmi %s/%s of pool %s: %w", l.VMI.Namespace, l.VMI.Name, p.Name, err)}
	}
	return nil
}

// release removes the pool's owner reference from a VM its selector no
// longer matches (UID and resourceVersion preconditions).
func (c *Controller) release(ctx context.Context, p *poolv1.VirtualMachinePool, vm *v1.VirtualMachine) error {
	var refs []metav1.OwnerReference
	for _, r := range vm.OwnerReferences {
		if r.UID != p.UID {
			refs = append(refs, r)
		}
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"ownerReferences": refs, "uid": vm.UID, "resourceVersion": vm.ResourceVersion,
	}})
	if err != nil {
		return err
	}
	if _, err := c.d.VMAPI.VirtualMachines(vm.Namespace).Patch(ctx, vm.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: v1.ManagerController}); err != nil {
		return fmt.Errorf("release vm %s/%s from pool %s: %w", vm.Namespace, vm.Name, p.Name, err)
	}
	c.d.Recorder.Eventf(p, corev1.EventTypeNormal, EventReleased, "Released VirtualMachine %s: its labels no longer match the selector", vm.Name)
	return nil
}

// writeStatus replaces the status if it changed; the pool controller is
// the only writer of pool status.
func (c *Controller) writeStatus(ctx context.Context, p *poolv1.VirtualMachinePool, status poolv1.VirtualMachinePoolStatus) error {
	if equality.Semantic.DeepEqual(p.Status, status) {
		return nil
	}
	wasPaused, nowPaused := hasCondition(p.Status.Conditions, poolv1.VirtualMachinePoolReplicaPaused), hasCondition(status.Conditions, poolv1.VirtualMachinePoolReplicaPaused)
	p = p.DeepCopy()
	p.Status = status
	_, err := c.d.PoolAPI.VirtualMachinePools(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{FieldManager: v1.ManagerController})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("update status of pool %s/%s: %w", p.Namespace, p.Name, err)
	}
	switch {
	case nowPaused && !wasPaused:
		c.d.Recorder.Eventf(p, corev1.EventTypeNormal, ReasonPaused, "Pool is paused")
	case wasPaused && !nowPaused:
		c.d.Recorder.Eventf(p, corev1.EventTypeNormal, EventResumed, "Pool is unpaused")
	}
	return nil
}

// VMHandler returns VM informer handlers that settle the expectations of
// the VM's pool and enqueue the pool through enqueue.
func (c *Controller) VMHandler(enqueue func(key string)) cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			vm, ok := obj.(*v1.VirtualMachine)
			if !ok {
				return
			}
			if key := controllerKey(vm); key != "" {
				if vm.DeletionTimestamp != nil {
					c.expect.Deleted(key, vm.UID)
				} else {
					c.expect.Created(key)
				}
				enqueue(key)
			}
		},
		UpdateFunc: func(oldObj, curObj any) {
			old, ok1 := oldObj.(*v1.VirtualMachine)
			cur, ok2 := curObj.(*v1.VirtualMachine)
			if !ok1 || !ok2 {
				return
			}
			key := controllerKey(cur)
			if key != "" && cur.DeletionTimestamp != nil {
				c.expect.Deleted(key, cur.UID)
			}
			if oldKey := controllerKey(old); oldKey != "" && oldKey != key {
				enqueue(oldKey)
			}
			if key != "" {
				enqueue(key)
			}
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			vm, ok := obj.(*v1.VirtualMachine)
			if !ok {
				return
			}
			if key := controllerKey(vm); key != "" {
				c.expect.Deleted(key, vm.UID)
				enqueue(key)
			}
		},
	}
}

// VMIHandler returns VMI informer handlers that enqueue, through
// enqueue, the pool of the VM controlling the VMI: a VMI that becomes
// ready, or goes, may let a rollout go on.
func (c *Controller) VMIHandler(enqueue func(key string)) cache.ResourceEventHandlerFuncs {
	poolOf := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		vmi, ok := obj.(*v1.VirtualMachineInstance)
		if !ok {
			return
		}
		ref := metav1.GetControllerOf(vmi)
		if ref == nil || ref.Kind != v1.KindVM {
			return
		}
		vm, err := c.d.VMs.VirtualMachines(vmi.Namespace).Get(ref.Name)
		if err != nil || vm.UID != ref.UID {
			return
		}
		if key := controllerKey(vm); key != "" {
			enqueue(key)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    poolOf,
		UpdateFunc: func(_, cur any) { poolOf(cur) },
		DeleteFunc: poolOf,
	}
}

// controllerKey is the namespace/name key of the pool controlling vm, ""
// if none does.
func controllerKey(vm *v1.VirtualMachine) string {
	ref := metav1.GetControllerOf(vm)
	if ref == nil || ref.Kind != poolv1.VirtualMachinePoolKind || ref.APIVersion != poolv1.SchemeGroupVersion.String() {
		return ""
	}
	return vm.Namespace + "/" + ref.Name
}

func hasCondition(conds []poolv1.VirtualMachinePoolCondition, t poolv1.VirtualMachinePoolConditionType) bool {
	for _, c := range conds {
		if c.Type == t {
			return true
		}
	}
	return false
}

// scaleOutError and scaleInError mark which kind of change failed, for the
// ReplicaFailure condition's reason.
type scaleOutError struct{ error }

func (e *scaleOutError) Unwrap() error { return e.error }

type scaleInError struct{ error }

func (e *scaleInError) Unwrap() error { return e.error }

type updateError struct{ error }

func (e *updateError) Unwrap() error { return e.error }

func failureReason(err error) string {
	var out *scaleOutError
	var in *scaleInError
	var up *updateError
	switch {
	case errors.As(err, &out):
		return ReasonScaleOut
	case errors.As(err, &in):
		return ReasonScaleIn
	case errors.As(err, &up):
		return ReasonUpdate
	}
	return ""
}
