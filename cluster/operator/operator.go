package operator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/tools/cache"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/cluster/client/clientset/versioned"
	kvlisters "github.com/nodevirt/nodevirt/cluster/client/listers/api/v1"
)

// reapply is how often the components are applied again although nothing
// asked for it: drift (an edited or deleted object) is repaired within it.
const reapply = 5 * time.Minute

// Mapper maps kinds to resources; Reset forgets what it learned, after a
// CRD was installed.
type Mapper interface {
	RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error)
	Reset()
}

// Enqueuer schedules a later sync of a key.
type Enqueuer interface {
	EnqueueAfter(key string, d time.Duration)
}

// WorkloadLister lists a kind of the cluster's workloads by their metadata
// (a metadata-only informer's lister: the operator never decodes a VMI).
type WorkloadLister interface {
	List(selector labels.Selector) ([]*metav1.PartialObjectMetadata, error)
}

// Deps are the operator's informer caches and clients.
type Deps struct {
	KubeVirts   kvlisters.KubeVirtLister
	Deployments appslisters.DeploymentLister
	DaemonSets  appslisters.DaemonSetLister
	// VMs and VMIs are the cluster's workloads, metadata only: a deletion
	// counts them and deletes them by name.
	VMs     WorkloadLister
	VMIs    WorkloadLister
	Client  versioned.Interface
	Core    CoreClient // the TLS material (certificates.go)
	Dynamic dynamic.Interface
	Mapper  Mapper
	// Manifests are the components' manifests by component name.
	Manifests map[string][]byte
	// Own are the operator's own registry and version: the defaults.
	Own   Images
	Queue Enqueuer // may be nil in tests
	Log   *slog.Logger
	Now   func() time.Time
}

// Operator reconciles KubeVirt resources (keyed namespace/name).
type Operator struct {
	d Deps

	mu      sync.Mutex
	applied map[string]appliedState // by key
}

// appliedState is what was last applied for a KubeVirt.
type appliedState struct {
	generation int64
	target     Images
	at         time.Time
}

// New returns an operator.
func New(d Deps) *Operator {
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	return &Operator{d: d, applied: map[string]appliedState{}}
}

// Sync reconciles the KubeVirt resource key.
func (op *Operator) Sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return err
	}
	kv, err := op.d.KubeVirts.KubeVirts(ns).Get(name)
	if apierrors.IsNotFound(err) {
		op.forget(key)
		return nil
	}
	if err != nil {
		return err
	}
	target := TargetImages(kv, op.d.Own)
	objs, invalid := Render(op.d.Manifests, target, &kv.Spec)
	if invalid != nil {
		// Observed (and, deleting, removed) as rendered without the
		// customization; nothing is applied until it is fixed.
		if objs, err = Render(op.d.Manifests, target, nil); err != nil {
			return err
		}
	}
	o, err := op.observe(ctx, kv, target, objs)
	if err != nil {
		return err
	}
	if invalid != nil {
		o.Invalid = invalid.Error()
	}
	res := Plan(o)
	if err := op.act(ctx, key, kv, objs, res); err != nil {
		return err
	}
	if res.Requeue > 0 && op.d.Queue != nil {
		op.d.Queue.EnqueueAfter(key, res.Requeue)
	}
	return nil
}

// observe reads the rendered workloads' state, the cluster's VMs and VMIs
// and, while deleting, how many removable objects remain.
func (op *Operator) observe(ctx context.Context, kv *v1.KubeVirt, target Images, objs []Object) (Observed, error) {
	o := Observed{KubeVirt: kv, Target: target, OperatorVersion: op.d.Own.Tag, Now: op.d.Now()}
	for _, obj := range objs {
		switch obj.GetKind() {
		case "Deployment":
			d, err := op.d.Deployments.Deployments(obj.GetNamespace()).Get(obj.GetName())
			switch {
			case apierrors.IsNotFound(err):
				o.Workloads = append(o.Workloads, Workload{Kind: "Deployment", Name: obj.GetName()})
			case err != nil:
				return o, err
			default:
				o.Workloads = append(o.Workloads, DeploymentState(d, target.Tag))
			}
		case "DaemonSet":
			ds, err := op.d.DaemonSets.DaemonSets(obj.GetNamespace()).Get(obj.GetName())
			switch {
			case apierrors.IsNotFound(err):
				o.Workloads = append(o.Workloads, Workload{Kind: "DaemonSet", Name: obj.GetName()})
			case err != nil:
				return o, err
			default:
				o.Workloads = append(o.Workloads, DaemonSetState(ds, target.Tag))
			}
		}
	}
	if kv.DeletionTimestamp == nil {
		return o, nil
	}
	vms, err := op.d.VMs.List(labels.Everything())
	if err != nil {
		return o, err
	}
	vmis, err := op.d.VMIs.List(labels.Everything())
	if err != nil {
		return o, err
	}
	o.VMs, o.VMIs = len(vms), len(vmis)
	for _, obj := range objs {
		if obj.Component.Keep {
			continue
		}
		ri, err := op.resource(obj)
		if err != nil {
			if meta.IsNoMatchError(err) {
				continue // its kind is gone: so is it
			}
			return o, err
		}
		_, err = ri.Get(ctx, obj.GetName(), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return o, err
		default:
			o.Remaining++
		}
	}
	certs, err := op.remainingCertificates(ctx, kv.Namespace)
	o.Remaining += certs
	return o, err
}

// act carries out res.
func (op *Operator) act(ctx context.Context, key string, kv *v1.KubeVirt, objs []Object, res Result) error {
	if res.AddFinalizer {
		updated, err := op.patchFinalizers(ctx, kv, append(slices.Clone(kv.Finalizers), Finalizer))
		if err != nil {
			return err
		}
		kv = updated
	}
	if res.Apply && op.dueApply(key, kv, res) {
		bundle, err := op.ensureCertificates(ctx, kv.Namespace)
		if err != nil {
			return err
		}
		if err := setCABundle(objs, bundle); err != nil {
			return err
		}
		if err := op.apply(ctx, objs); err != nil {
			return err
		}
		op.mu.Lock()
		op.applied[key] = appliedState{generation: kv.Generation, target: Images{Registry: res.Status.TargetKubeVirtRegistry, Tag: res.Status.TargetKubeVirtVersion}, at: op.d.Now()}
		op.mu.Unlock()
	}
	if res.DeleteWorkloads {
		if err := op.deleteWorkloads(ctx); err != nil {
			return err
		}
	}
	if res.DeleteComponents {
		if err := op.deleteComponents(ctx, objs); err != nil {
			return err
		}
		if err := op.deleteCertificates(ctx, kv.Namespace); err != nil {
			return err
		}
	}
	if !equality.Semantic.DeepEqual(kv.Status, res.Status) {
		cp := kv.DeepCopy()
		cp.Status = res.Status
		updated, err := op.d.Client.KubevirtV1().KubeVirts(kv.Namespace).UpdateStatus(ctx, cp, metav1.UpdateOptions{FieldManager: ManagedBy})
		if err != nil {
			return fmt.Errorf("kubevirt %s: status: %w", key, err)
		}
		kv = updated
	}
	if res.RemoveFinalizer {
		fins := slices.DeleteFunc(slices.Clone(kv.Finalizers), func(f string) bool { return f == Finalizer })
		if _, err := op.patchFinalizers(ctx, kv, fins); err != nil {
			return err
		}
		op.forget(key)
		op.d.Log.Info("components removed", "kubevirt", key)
	}
	return nil
}

// dueApply reports whether the components must be applied: a new
// generation or target, a workload missing, or reapply elapsed.
func (op *Operator) dueApply(key string, kv *v1.KubeVirt, res Result) bool {
	op.mu.Lock()
	last, ok := op.applied[key]
	op.mu.Unlock()
	target := Images{Registry: res.Status.TargetKubeVirtRegistry, Tag: res.Status.TargetKubeVirtVersion}
	if !ok || last.generation != kv.Generation || last.target != target || op.d.Now().Sub(last.at) >= reapply {
		return true
	}
	for _, w := range res.workloads {
		if !w.Found {
			return true // deleted behind the operator's back
		}
	}
	return false
}

func (op *Operator) forget(key string) {
	op.mu.Lock()
	delete(op.applied, key)
	op.mu.Unlock()
}

// apply server-side applies every object in order, as the operator's
// field manager (forcing: the operator owns what it installs).
func (op *Operator) apply(ctx context.Context, objs []Object) error {
	start := op.d.Now()
	for _, obj := range objs {
		ri, err := op.resource(obj)
		if meta.IsNoMatchError(err) {
			op.d.Mapper.Reset() // a CRD applied just before
			ri, err = op.resource(obj)
		}
		if err != nil {
			return fmt.Errorf("apply %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
		if _, err := ri.Apply(ctx, obj.GetName(), obj.Unstructured, metav1.ApplyOptions{FieldManager: ManagedBy, Force: true}); err != nil {
			return fmt.Errorf("apply %s %s (component %s): %w", obj.GetKind(), obj.GetName(), obj.Component.Name, err)
		}
	}
	op.d.Log.Info("components applied", "objects", len(objs), "took", op.d.Now().Sub(start))
	return nil
}

// deleteComponents deletes the removable objects in reverse order.
func (op *Operator) deleteComponents(ctx context.Context, objs []Object) error {
	bg := metav1.DeletePropagationBackground
	for i := len(objs) - 1; i >= 0; i-- {
		obj := objs[i]
		if obj.Component.Keep {
			continue
		}
		ri, err := op.resource(obj)
		if meta.IsNoMatchError(err) {
			continue
		}
		if err != nil {
			return err
		}
		err = ri.Delete(ctx, obj.GetName(), metav1.DeleteOptions{PropagationPolicy: &bg})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
	}
	return nil
}

// deleteWorkloads deletes every VM, then every VMI.
func (op *Operator) deleteWorkloads(ctx context.Context) error {
	vms, err := op.d.VMs.List(labels.Everything())
	if err != nil {
		return err
	}
	var errs []error
	for _, vm := range vms {
		if vm.DeletionTimestamp == nil {
			err := op.d.Client.KubevirtV1().VirtualMachines(vm.Namespace).Delete(ctx, vm.Name, metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, err)
			}
		}
	}
	vmis, err := op.d.VMIs.List(labels.Everything())
	if err != nil {
		return err
	}
	for _, vmi := range vmis {
		if vmi.DeletionTimestamp == nil {
			err := op.d.Client.KubevirtV1().VirtualMachineInstances(vmi.Namespace).Delete(ctx, vmi.Name, metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// resource is the dynamic client of obj's resource.
func (op *Operator) resource(obj Object) (dynamic.ResourceInterface, error) {
	gvk := obj.GroupVersionKind()
	m, err := op.d.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, err
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return op.d.Dynamic.Resource(m.Resource).Namespace(obj.GetNamespace()), nil
	}
	return op.d.Dynamic.Resource(m.Resource), nil
}

// patchFinalizers sets kv's finalizers, guarded by its resourceVersion,
// and returns the updated resource.
func (op *Operator) patchFinalizers(ctx context.Context, kv *v1.KubeVirt, fins []string) (*v1.KubeVirt, error) {
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"finalizers": fins, "resourceVersion": kv.ResourceVersion}})
	if err != nil {
		return nil, err
	}
	updated, err := op.d.Client.KubevirtV1().KubeVirts(kv.Namespace).Patch(ctx, kv.Name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: ManagedBy})
	if err != nil {
		return nil, fmt.Errorf("kubevirt %s/%s: finalizers: %w", kv.Namespace, kv.Name, err)
	}
	return updated, nil
}
