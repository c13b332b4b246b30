package vm

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
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	kvclient "github.com/nodevirt/nodevirt/cluster/client/clientset/versioned/typed/api/v1"
	listers "github.com/nodevirt/nodevirt/cluster/client/listers/api/v1"
)

// Event reasons the VM controller records.
const (
	EventCreated       = "SuccessfulCreate"
	EventDeleted       = "SuccessfulDelete"
	EventFailedCreate  = "FailedCreate"
	EventAdopted       = "Adopted"
	EventOwnedByOther  = "VMIOwnedByOther"
	EventCrashLoop     = "CrashLoopBackOff"
	EventOrphanDeleted = "OrphanDeleted"
	EventStartHalted   = "StartRequested"
)

// Enqueuer schedules a later sync of a key.
type Enqueuer interface {
	EnqueueAfter(key string, d time.Duration)
}

// Deps are the VM controller's collaborators.
type Deps struct {
	VMs      listers.VirtualMachineLister
	VMIs     listers.VirtualMachineInstanceLister
	Client   kvclient.KubevirtV1Interface
	Recorder record.EventRecorder
	// Queue receives delayed requeues (backoff expiry); may be nil in tests.
	Queue Enqueuer
	// Instancetypes resolves spec.instancetype and spec.preference; nil
	// creates VMIs from the template alone.
	Instancetypes Instancetypes
	// Now defaults to time.Now; Jitter to math/rand/v2.Float64.
	Now    func() time.Time
	Jitter func() float64
}

// Controller syncs VirtualMachines. Build it with New.
type Controller struct {
	d Deps
}

// New returns a VM controller.
func New(d Deps) *Controller {
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Jitter == nil {
		d.Jitter = rand.Float64
	}
	return &Controller{d: d}
}

// Sync reconciles the VM named by key (namespace/name).
func (c *Controller) Sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return fmt.Errorf("vm key %q: %w", key, err)
	}
	vmi, err := c.d.VMIs.VirtualMachineInstances(ns).Get(name)
	if apierrors.IsNotFound(err) {
		vmi = nil
	} else if err != nil {
		return fmt.Errorf("get vmi %s: %w", key, err)
	}
	vm, err := c.d.VMs.VirtualMachines(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return c.deleteOrphan(ctx, vmi)
	}
	if err != nil {
		return fmt.Errorf("get vm %s: %w", key, err)
	}
	o := Observed{VM: vm, VMI: vmi, Now: c.d.Now(), Jitter: c.d.Jitter()}
	if vmi != nil {
		o.Relation = Relate(vm, vmi)
		if o.Relation == Foreign {
			c.d.Recorder.Eventf(vm, corev1.EventTypeWarning, EventOwnedByOther, "VirtualMachineInstance %s is controlled by another object", name)
		}
	}
	res := Plan(o)
	if err := c.instancetypes(ctx, vm, &res, o.Now); err != nil {
		return err
	}
	vm, err = c.apply(ctx, vm, vmi, res)
	if permanent(err) && res.Action == CreateVMI {
		// A user error (the template is rejected): report it on the VM and
		// wait for the VM to change instead of retrying hot.
		res.Status.Conditions = setFailure(res.Status.Conditions, EventFailedCreate, err, o.Now)
		res.Status.StateChangeRequests = vm.Status.StateChangeRequests // a Start stays until it succeeds
		return c.writeStatus(ctx, vm, res.Status)
	}
	if err != nil {
		return err
	}
	if sf := res.Status.StartFailure; sf != nil && !equality.Semantic.DeepEqual(sf, vm.Status.StartFailure) {
		c.d.Recorder.Eventf(vm, corev1.EventTypeWarning, EventCrashLoop, "VirtualMachineInstance failed %d time(s) in a row; next start after %s",
			sf.ConsecutiveFailCount, sf.RetryAfterTimestamp.Format(time.RFC3339))
	}
	if err := c.writeStatus(ctx, vm, res.Status); err != nil {
		return err
	}
	if res.RequeueAfter > 0 && c.d.Queue != nil {
		c.d.Queue.EnqueueAfter(key, res.RequeueAfter)
	}
	return nil
}

// apply performs the planned action. It returns the VM as last written (a
// finalizer update changes its resourceVersion).
func (c *Controller) apply(ctx context.Context, vm *v1.VirtualMachine, vmi *v1.VirtualMachineInstance, res Result) (*v1.VirtualMachine, error) {
	var err error
	switch res.Action {
	case CreateVMI:
		err = c.createVMI(ctx, vm, res)
	case DeleteVMI:
		err = c.deleteVMI(ctx, vm, vmi)
	case AdoptVMI:
		err = c.adopt(ctx, vm, vmi)
	case AddFinalizer:
		return c.setFinalizer(ctx, vm, true)
	case RemoveFinalizer:
		return c.setFinalizer(ctx, vm, false)
	case StartHalted:
		return c.startHalted(ctx, vm)
	}
	return vm, err
}

// NewVMI renders the VMI a VM creates from its template.
func NewVMI(vm *v1.VirtualMachine) *v1.VirtualMachineInstance {
	vmi := &v1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{
			Name:            vm.Name,
			Namespace:       vm.Namespace,
			OwnerReferences: []metav1.OwnerReference{ownerRef(vm)},
			Finalizers:      []string{v1.VirtualMachineInstanceFinalizer},
		},
	}
	if t := vm.Spec.Template; t != nil {
		vmi.Labels = copyMap(t.ObjectMeta.Labels)
		vmi.Annotations = copyMap(t.ObjectMeta.Annotations)
		vmi.Spec = *t.Spec.DeepCopy()
	}
	return vmi
}

// defaultFirmwareUUID gives a VMI whose (expanded) spec has no
// firmware.uuid the VM's UID as the guest's SMBIOS UUID, so the guest sees
// one UUID across restarts and no other VM shares it (KubeVirt's firmware
// UUID persistence, VEP 14, stores the same value into the VM's template;
// nodevirt leaves the user's spec alone).
func defaultFirmwareUUID(vm *v1.VirtualMachine, vmi *v1.VirtualMachineInstance) {
	if vm.UID == "" {
		return
	}
	fw := vmi.Spec.Domain.Firmware
	if fw == nil {
		fw = &v1.Firmware{}
		vmi.Spec.Domain.Firmware = fw
	}
	if fw.UUID == "" {
		fw.UUID = vm.UID
	}
}

func (c *Controller) createVMI(ctx context.Context, vm *v1.VirtualMachine, res Result) error {
	vmi := NewVMI(vm)
	if err := c.expandVMI(ctx, vm, res.Status, vmi); err != nil {
		c.d.Recorder.Eventf(vm, corev1.EventTypeWarning, EventFailedCreate, "Error creating VirtualMachineInstance: %v", err)
		return fmt.Errorf("expand vmi %s/%s: %w", vm.Namespace, vm.Name, err)
	}
	defaultFirmwareUUID(vm, vmi)
	if res.StartPaused {
		s := v1.StartStrategyPaused
		vmi.Spec.StartStrategy = &s
	}
	_, err := c.d.Client.VirtualMachineInstances(vm.Namespace).Create(ctx, vmi, metav1.CreateOptions{FieldManager: v1.ManagerController})
	switch {
	case apierrors.IsAlreadyExists(err):
		return nil // the cache lags; the next sync sees it
	case err != nil:
		c.d.Recorder.Eventf(vm, corev1.EventTypeWarning, EventFailedCreate, "Error creating VirtualMachineInstance: %v", err)
		return fmt.Errorf("create vmi %s/%s: %w", vm.Namespace, vm.Name, err)
	}
	c.d.Recorder.Eventf(vm, corev1.EventTypeNormal, EventCreated, "Created VirtualMachineInstance %s", vm.Name)
	return nil
}

func (c *Controller) deleteVMI(ctx context.Context, vm *v1.VirtualMachine, vmi *v1.VirtualMachineInstance) error {
	if err := c.delete(ctx, vmi); err != nil {
		return err
	}
	c.d.Recorder.Eventf(vm, corev1.EventTypeNormal, EventDeleted, "Stopped the VirtualMachineInstance %s (uid %s)", vmi.Name, vmi.UID)
	return nil
}

func (c *Controller) delete(ctx context.Context, vmi *v1.VirtualMachineInstance) error {
	uid := vmi.UID
	err := c.d.Client.VirtualMachineInstances(vmi.Namespace).Delete(ctx, vmi.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &uid},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete vmi %s/%s: %w", vmi.Namespace, vmi.Name, err)
	}
	return nil
}

// deleteOrphan deletes a VMI whose controlling VM is gone.
func (c *Controller) deleteOrphan(ctx context.Context, vmi *v1.VirtualMachineInstance) error {
	if vmi == nil || vmi.DeletionTimestamp != nil {
		return nil
	}
	ref := metav1.GetControllerOf(vmi)
	if ref == nil || ref.Kind != vmKind {
		return nil
	}
	if err := c.delete(ctx, vmi); err != nil {
		return err
	}
	c.d.Recorder.Eventf(vmi, corev1.EventTypeNormal, EventOrphanDeleted, "Deleted: its VirtualMachine %s is gone", ref.Name)
	return nil
}

func (c *Controller) adopt(ctx context.Context, vm *v1.VirtualMachine, vmi *v1.VirtualMachineInstance) error {
	refs := append(append([]metav1.OwnerReference{}, vmi.OwnerReferences...), ownerRef(vm))
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"ownerReferences": refs, "uid": vmi.UID, "resourceVersion": vmi.ResourceVersion,
	}})
	if err != nil {
		return err
	}
	_, err = c.d.Client.VirtualMachineInstances(vmi.Namespace).Patch(ctx, vmi.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: v1.ManagerController})
	if err != nil {
		return fmt.Errorf("adopt vmi %s/%s: %w", vmi.Namespace, vmi.Name, err)
	}
	c.d.Recorder.Eventf(vm, corev1.EventTypeNormal, EventAdopted, "Adopted orphan VirtualMachineInstance %s", vmi.Name)
	return nil
}

func (c *Controller) setFinalizer(ctx context.Context, vm *v1.VirtualMachine, present bool) (*v1.VirtualMachine, error) {
	vm = vm.DeepCopy()
	var fs []string
	for _, f := range vm.Finalizers {
		if f != v1.VirtualMachineControllerFinalizer {
			fs = append(fs, f)
		}
	}
	if present {
		fs = append(fs, v1.VirtualMachineControllerFinalizer)
	}
	vm.Finalizers = fs
	updated, err := c.d.Client.VirtualMachines(vm.Namespace).Update(ctx, vm, metav1.UpdateOptions{FieldManager: v1.ManagerController})
	if apierrors.IsNotFound(err) && !present {
		return vm, nil
	}
	if err != nil {
		return nil, fmt.Errorf("update finalizers of vm %s/%s: %w", vm.Namespace, vm.Name, err)
	}
	return updated, nil
}

// writeStatus patches the status subresource if it changed: a JSON merge
// patch of the fields that changed, under the controller's field manager.
// The controller writes all of VM status but shares stateChangeRequests
// with nodevirt-api (v1.StatusOwnership: a queue the API appends to and the
// controller consumes); the patch carries the observed resourceVersion, so
// an append since the observation makes it fail with a conflict and the key
// is synced again on fresh data: the append is never lost. (Server-side
// apply cannot express this compare-and-swap: it could not clear a request
// list another manager also owns.)
func (c *Controller) writeStatus(ctx context.Context, vm *v1.VirtualMachine, status v1.VirtualMachineStatus) error {
	if equality.Semantic.DeepEqual(vm.Status, status) {
		return nil
	}
	patch, err := statusPatch(vm, status)
	if err != nil {
		return fmt.Errorf("status patch of vm %s/%s: %w", vm.Namespace, vm.Name, err)
	}
	_, err = c.d.Client.VirtualMachines(vm.Namespace).Patch(ctx, vm.Name, types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: v1.ManagerController}, "status")
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("patch status of vm %s/%s: %w", vm.Namespace, vm.Name, err)
	}
	return nil
}

// startHalted sets a Halted VM to Always (spec.running true when the VM
// uses spec.running), the way KubeVirt honours `virtctl start --paused` on
// a Halted VM; the Start request stays and creates the VMI next sync. The
// update carries the observed resourceVersion.
func (c *Controller) startHalted(ctx context.Context, vm *v1.VirtualMachine) (*v1.VirtualMachine, error) {
	vm = vm.DeepCopy()
	if vm.Spec.Running != nil {
		vm.Spec.Running = ptr.To(true)
	} else {
		vm.Spec.RunStrategy = ptr.To(v1.RunStrategyAlways)
	}
	updated, err := c.d.Client.VirtualMachines(vm.Namespace).Update(ctx, vm, metav1.UpdateOptions{FieldManager: v1.ManagerController})
	if err != nil {
		return nil, fmt.Errorf("start halted vm %s/%s: %w", vm.Namespace, vm.Name, err)
	}
	c.d.Recorder.Eventf(vm, corev1.EventTypeNormal, EventStartHalted, "Set the run strategy to Always for a start request")
	return updated, nil
}

func copyMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// permanent reports errors that retrying the same request cannot fix: API
// errors, and errors that say so (an instancetype conflict).
func permanent(err error) bool {
	var p interface{ Permanent() bool }
	if errors.As(err, &p) {
		return p.Permanent()
	}
	return apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || apierrors.IsForbidden(err)
}

// setFailure sets the VM's Failure condition to True with reason and err's
// message.
func setFailure(conds []v1.VirtualMachineCondition, reason string, err error, now time.Time) []v1.VirtualMachineCondition {
	out := []v1.VirtualMachineCondition{{
		Type: v1.VirtualMachineFailure, Status: corev1.ConditionTrue, Reason: reason,
		Message: err.Error(), LastTransitionTime: metav1.NewTime(now.Truncate(time.Second)),
	}}
	for _, c := range conds {
		switch {
		case c.Type != v1.VirtualMachineFailure:
			out = append(out, c)
		case c.Status == corev1.ConditionTrue:
			out[0].LastTransitionTime = c.LastTransitionTime
		}
	}
	return out
}
