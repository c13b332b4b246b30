package pool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
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
	ReasonPaused      = "SuccessfulPaused"
	EventResumed      = "SuccessfulResume"
)

const parallelism = 16

// Deps are the pool controller's collaborators.
type Deps struct {
	Pools    poollisters.VirtualMachinePoolLister
	VMs      kvlisters.VirtualMachineLister
	VMAPI    kvclient.VirtualMachinesGetter
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
	now := c.d.Now()
	res := Plan(Observed{Pool: p, VMs: vms, Settled: c.expect.Settled(key), Now: now, Shuffle: rand.Shuffle})
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
	return errors.Join(errs...)
}

// NewVM renders the pool's VM called name: the template's labels,
// annotations and spec, and a controller reference that blocks the pool's
// foreground deletion.
func NewVM(p *poolv1.VirtualMachinePool, name string) *v1.VirtualMachine {
	t := p.Spec.VirtualMachineTemplate
	return &v1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			Namespace:       p.Namespace,
			Labels:          maps.Clone(t.ObjectMeta.Labels),
			Annotations:     maps.Clone(t.ObjectMeta.Annotations),
			OwnerReferences: []metav1.OwnerReference{OwnerRef(p)},
		},
		Spec: *t.Spec.DeepCopy(),
	}
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

func failureReason(err error) string {
	var out *scaleOutError
	var in *scaleInError
	switch {
	case errors.As(err, &out):
		return ReasonScaleOut
	case errors.As(err, &in):
		return ReasonScaleIn
	}
	return ""
}
