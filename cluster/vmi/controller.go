package vmi

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	kvclient "github.com/nodevirt/nodevirt/cluster/client/clientset/versioned/typed/api/v1"
	listers "github.com/nodevirt/nodevirt/cluster/client/listers/api/v1"
)

// Event reasons the VMI controller records.
const (
	EventCreatedPod      = "SuccessfulCreate"
	EventFailedCreatePod = "FailedCreate"
	EventDeletedPod      = "SuccessfulDelete"
	EventFailed          = "Failed"
)

// pvcRetry is how soon a VMI waiting for a missing PVC is looked at again.
const pvcRetry = 10 * time.Second

// Enqueuer schedules a later sync of a key.
type Enqueuer interface {
	EnqueueAfter(key string, d time.Duration)
}

// Deps are the VMI controller's collaborators.
type Deps struct {
	VMIs listers.VirtualMachineInstanceLister
	// Pods is the launcher pod informer's indexer, with PodIndexers.
	Pods     cache.Indexer
	PVCs     corelisters.PersistentVolumeClaimLister
	PodAPI   corev1client.PodsGetter
	Client   kvclient.VirtualMachineInstancesGetter
	Recorder record.EventRecorder
	Queue    Enqueuer // may be nil in tests
	Config   PodConfig
	// Live, when set, is the configuration in force, read for each new
	// pod instead of Config (cluster/liveconfig).
	Live func() PodConfig
	// Shapes chooses each new pod's shape (nil: Config.Shape).
	Shapes *Shapes
	// Accelerators chooses each new pod's accelerator (nil:
	// Config.Emulation).
	Accelerators *Accelerators
	Now          func() time.Time
}

// Controller syncs VirtualMachineInstances up to Scheduled and their pods.
type Controller struct {
	d          Deps
	expect     *expectations
	superseded *superseded
}

// New returns a VMI controller.
func New(d Deps) *Controller {
	if d.Now == nil {
		d.Now = time.Now
	}
	return &Controller{d: d, expect: newExpectations(), superseded: newSuperseded()}
}

// PodHandler returns pod informer handlers that enqueue the pod's VMI key
// through enqueue and settle creation expectations.
func (c *Controller) PodHandler(enqueue func(key string)) cache.ResourceEventHandlerFuncs {
	handle := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		if key := VMIKeyOfPod(pod); key != "" {
			c.expect.observed(types.UID(pod.Labels[v1.CreatedByLabel]))
			enqueue(key)
		}
	}
	return cache.ResourceEventHandlerFuncs{AddFunc: handle, UpdateFunc: func(_, o any) { handle(o) }, DeleteFunc: handle}
}

// Sync reconciles the VMI named by key.
func (c *Controller) Sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return fmt.Errorf("vmi key %q: %w", key, err)
	}
	pods, err := c.pods(key)
	if err != nil {
		return err
	}
	vmi, err := c.d.VMIs.VirtualMachineInstances(ns).Get(name)
	if apierrors.IsNotFound(err) {
		c.superseded.forget(key)
		return c.deleteStale(ctx, pods, "")
	}
	if err != nil {
		return fmt.Errorf("get vmi %s: %w", key, err)
	}
	if c.superseded.stale(key, vmi.ResourceVersion) {
		return nil
	}
	if err := c.deleteStale(ctx, pods, vmi.UID); err != nil {
		return err
	}
	now := c.d.Now()
	o := Observed{VMI: vmi, Pod: CurrentPod(pods, vmi), Now: now}
	o.PodPending = o.Pod == nil && c.expect.waiting(vmi.UID, now)
	var pod *corev1.Pod
	if o.Pod == nil && !o.PodPending && vmi.DeletionTimestamp == nil && !vmi.Status.Phase.OwnedByAgent() {
		pod, o.Volumes, o.RenderErr = c.render(vmi)
	}
	res := Plan(o)
	if err := c.apply(ctx, key, vmi, o, pod, res); err != nil {
		return err
	}
	if errors.Is(o.RenderErr, ErrPVCNotFound) && c.d.Queue != nil {
		c.d.Queue.EnqueueAfter(key, pvcRetry)
	}
	return nil
}

func (c *Controller) pods(key string) ([]*corev1.Pod, error) {
	objs, err := c.d.Pods.ByIndex(PodsByVMI, key)
	if err != nil {
		return nil, fmt.Errorf("launcher pods of vmi %s: %w", key, err)
	}
	pods := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			pods = append(pods, p)
		}
	}
	return pods, nil
}

// deleteStale deletes launcher pods of an earlier VMI of the same name (or
// of a VMI that is gone: its agent has released it).
func (c *Controller) deleteStale(ctx context.Context, pods []*corev1.Pod, uid types.UID) error {
	for _, p := range pods {
		if p.Labels[v1.CreatedByLabel] != string(uid) && p.DeletionTimestamp == nil {
			if err := c.deletePod(ctx, p); err != nil {
				return err
			}
		}
	}
	return nil
}

// render renders vmi's launcher pod from its PVCs as the cache has them,
// and the status entries of those PVC volumes.
func (c *Controller) render(vmi *v1.VirtualMachineInstance) (*corev1.Pod, []v1.VolumeStatus, error) {
	modes, caps := VolumeModes{}, PVCCapacities{}
	var volumes []v1.VolumeStatus
	for _, vol := range vmi.Spec.Volumes {
		if vol.PersistentVolumeClaim == nil {
			continue
		}
		claim := vol.PersistentVolumeClaim.ClaimName
		pvc, err := c.d.PVCs.PersistentVolumeClaims(vmi.Namespace).Get(claim)
		if apierrors.IsNotFound(err) {
			continue // RenderPod reports ErrPVCNotFound
		}
		if err != nil {
			return nil, nil, fmt.Errorf("get pvc %s/%s: %w", vmi.Namespace, claim, err)
		}
		modes[claim] = corev1.PersistentVolumeFilesystem
		if pvc.Spec.VolumeMode != nil {
			modes[claim] = *pvc.Spec.VolumeMode
		}
		if bytes, ok := ClaimCapacity(pvc); ok && modes[claim] == corev1.PersistentVolumeFilesystem {
			caps[vol.Name] = bytes
		}
		volumes = append(volumes, ClaimStatus(vol.Name, pvc))
	}
	cfg := c.d.Config
	if c.d.Live != nil {
		cfg = c.d.Live()
	}
	pod, err := RenderPod(vmi, c.d.Accelerators.Config(c.d.Shapes.Config(cfg), vmi), modes)
	if err != nil {
		return nil, nil, err
	}
	return pod, volumes, AnnotatePVCCapacities(pod, caps)
}

func (c *Controller) apply(ctx context.Context, key string, vmi *v1.VirtualMachineInstance, o Observed, pod *corev1.Pod, res Result) error {
	if res.CreatePod {
		if err := c.createPod(ctx, vmi, pod); err != nil {
			return err
		}
	}
	if res.DeletePod {
		if err := c.deletePod(ctx, o.Pod); err != nil {
			return err
		}
	}
	cur, err := c.updateMeta(ctx, vmi, res)
	if err != nil {
		return err
	}
	if cur.ResourceVersion != vmi.ResourceVersion {
		c.superseded.wrote(key, vmi.ResourceVersion)
	}
	if res.RemoveFinalizer || equality.Semantic.DeepEqual(cur.Status, res.Status) {
		return nil
	}
	out, err := c.applyStatus(ctx, cur, res.Status)
	if err != nil {
		return err
	}
	if out != nil && out.ResourceVersion != cur.ResourceVersion {
		c.superseded.wrote(key, cur.ResourceVersion)
	}
	if res.Status.Phase == v1.Failed && vmi.Status.Phase != v1.Failed {
		c.d.Recorder.Eventf(vmi, corev1.EventTypeWarning, EventFailed, "VirtualMachineInstance failed: %s", res.Status.Reason)
	}
	return nil
}

// applyStatus writes the controller's fields of status (v1.StatusOwnership)
// by server-side apply, guarded by vmi's resourceVersion: a stale cache
// gets a Conflict and the key is retried. Conditions and transition
// timestamps of other writers are left alone.
func (c *Controller) applyStatus(ctx context.Context, vmi *v1.VirtualMachineInstance, status v1.VirtualMachineInstanceStatus) (*v1.VirtualMachineInstance, error) {
	out, err := v1.ApplyStatusResult(ctx, c.d.Client.VirtualMachineInstances(vmi.Namespace), vmi, status, v1.ManagerController)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return out, err
}

func (c *Controller) createPod(ctx context.Context, vmi *v1.VirtualMachineInstance, pod *corev1.Pod) error {
	c.expect.created(vmi.UID, c.d.Now())
	created, err := c.d.PodAPI.Pods(vmi.Namespace).Create(ctx, pod, metav1.CreateOptions{FieldManager: v1.ManagerController})
	if err != nil {
		c.expect.observed(vmi.UID)
		c.d.Recorder.Eventf(vmi, corev1.EventTypeWarning, EventFailedCreatePod, "Error creating launcher pod: %v", err)
		return fmt.Errorf("create launcher pod of vmi %s/%s: %w", vmi.Namespace, vmi.Name, err)
	}
	c.d.Recorder.Eventf(vmi, corev1.EventTypeNormal, EventCreatedPod, "Created launcher pod %s", created.Name)
	return nil
}

func (c *Controller) deletePod(ctx context.Context, pod *corev1.Pod) error {
	uid := pod.UID
	err := c.d.PodAPI.Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete launcher pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

// updateMeta writes finalizer and label changes; it returns the VMI as
// last written (or the cached one if nothing changed).
func (c *Controller) updateMeta(ctx context.Context, vmi *v1.VirtualMachineInstance, res Result) (*v1.VirtualMachineInstance, error) {
	if !res.AddFinalizer && !res.RemoveFinalizer && res.NodeLabel == "" {
		return vmi, nil
	}
	vmi = vmi.DeepCopy()
	switch {
	case res.AddFinalizer:
		vmi.Finalizers = append(vmi.Finalizers, v1.VirtualMachineInstanceFinalizer)
	case res.RemoveFinalizer:
		var fs []string
		for _, f := range vmi.Finalizers {
			if f != v1.VirtualMachineInstanceFinalizer {
				fs = append(fs, f)
			}
		}
		vmi.Finalizers = fs
	}
	if res.NodeLabel != "" {
		if vmi.Labels == nil {
			vmi.Labels = map[string]string{}
		}
		vmi.Labels[v1.NodeNameLabel] = res.NodeLabel
	}
	updated, err := c.d.Client.VirtualMachineInstances(vmi.Namespace).Update(ctx, vmi, metav1.UpdateOptions{FieldManager: v1.ManagerController})
	if apierrors.IsNotFound(err) && res.RemoveFinalizer {
		return vmi, nil
	}
	if err != nil {
		return nil, fmt.Errorf("update metadata of vmi %s/%s: %w", vmi.Namespace, vmi.Name, err)
	}
	return updated, nil
}
