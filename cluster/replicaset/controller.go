package replicaset

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	kvclient "github.com/nodevirt/nodevirt/cluster/client/clientset/versioned/typed/api/v1"
	listers "github.com/nodevirt/nodevirt/cluster/client/listers/api/v1"
	"github.com/nodevirt/nodevirt/cluster/reconcile"
)

// Kind is the Kind of replica set owner references.
const Kind = "VirtualMachineInstanceReplicaSet"

// Event and condition reasons, KubeVirt's.
const (
	EventCreated      = "SuccessfulCreate"
	EventFailedCreate = "FailedCreate"
	EventDeleted      = "SuccessfulDelete"
	EventFailedDelete = "FailedDelete"
	EventAdopted      = "Adopted"
	EventReleased     = "Released"
	ReasonPaused      = "Paused"
	EventPaused       = "SuccessfulPaused"
	EventResumed      = "SuccessfulResumed"
)

// parallelism bounds the concurrent API calls of one sync.
const parallelism = 16

// Client is what the controller writes through.
type Client interface {
	kvclient.VirtualMachineInstancesGetter
	kvclient.VirtualMachineInstanceReplicaSetsGetter
}

// Deps are the replica set controller's collaborators.
type Deps struct {
	ReplicaSets listers.VirtualMachineInstanceReplicaSetLister
	VMIs        listers.VirtualMachineInstanceLister
	Client      Client
	Recorder    record.EventRecorder
	// Now defaults to time.Now.
	Now func() time.Time
}

// Controller syncs VirtualMachineInstanceReplicaSets. Build it with New.
type Controller struct {
	d      Deps
	expect *reconcile.Expectations
}

// New returns a replica set controller.
func New(d Deps) *Controller {
	if d.Now == nil {
		d.Now = time.Now
	}
	return &Controller{d: d, expect: reconcile.NewExpectations(d.Now)}
}

// Sync reconciles the replica set named by key (namespace/name).
func (c *Controller) Sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return fmt.Errorf("replica set key %q: %w", key, err)
	}
	rs, err := c.d.ReplicaSets.VirtualMachineInstanceReplicaSets(ns).Get(name)
	if apierrors.IsNotFound(err) {
		c.expect.Forget(key) // the garbage collector deletes its VMIs
		return nil
	}
	if err != nil {
		return fmt.Errorf("get replica set %s: %w", key, err)
	}
	vmis, err := c.d.VMIs.VirtualMachineInstances(ns).List(labels.Everything())
	if err != nil {
		return fmt.Errorf("list vmis of %s: %w", key, err)
	}
	now := c.d.Now()
	res := Plan(Observed{RS: rs, VMIs: vmis, Settled: c.expect.Settled(key), Now: now})
	actErr := c.apply(ctx, key, rs, res)
	status := res.Status
	if reason := failureReason(actErr); reason != "" {
		status.Conditions = setCondition(status.Conditions, v1.VirtualMachineInstanceReplicaSetCondition{
			Type: v1.VirtualMachineInstanceReplicaSetReplicaFailure, Status: corev1.ConditionTrue,
			Reason: reason, Message: actErr.Error(),
		}, now)
	} else if actErr == nil {
		status.Conditions = removeCondition(status.Conditions, v1.VirtualMachineInstanceReplicaSetReplicaFailure)
	}
	return errors.Join(actErr, c.writeStatus(ctx, rs, status))
}

// apply performs the plan: ownership changes first (adopted VMIs count as
// replicas), then deletes and creates. It returns every failure, each
// wrapped in a createError or deleteError when it is one.
func (c *Controller) apply(ctx context.Context, key string, rs *v1.VirtualMachineInstanceReplicaSet, res Result) error {
	var errs []error
	for _, vmi := range res.Adopt {
		errs = append(errs, c.adopt(ctx, rs, vmi))
	}
	for _, vmi := range res.Release {
		errs = append(errs, c.release(ctx, rs, vmi))
	}
	if err := errors.Join(errs...); err != nil {
		return err // scale on a settled ownership only
	}
	uids := make([]types.UID, len(res.Delete))
	for i, vmi := range res.Delete {
		uids[i] = vmi.UID
	}
	c.expect.Expect(key, res.Create, uids)
	errs = append(errs, reconcile.Parallel(len(res.Delete), parallelism, func(i int) error {
		return c.deleteVMI(ctx, key, rs, res.Delete[i])
	}))
	errs = append(errs, reconcile.Parallel(res.Create, parallelism, func(int) error {
		return c.createVMI(ctx, key, rs)
	}))
	return errors.Join(errs...)
}

// NewVMI renders a replica of rs: generateName from the template's name or
// generateName, else the replica set's name (KubeVirt's rule: no dash is
// added), the template's labels and annotations, and a controller
// reference that blocks the replica set's foreground deletion.
func NewVMI(rs *v1.VirtualMachineInstanceReplicaSet) *v1.VirtualMachineInstance {
	t := rs.Spec.Template
	base := rs.Name
	switch {
	case t.ObjectMeta.Name != "":
		base = t.ObjectMeta.Name
	case t.ObjectMeta.GenerateName != "":
		base = t.ObjectMeta.GenerateName
	}
	return &v1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    base,
			Namespace:       rs.Namespace,
			Labels:          maps.Clone(t.ObjectMeta.Labels),
			Annotations:     maps.Clone(t.ObjectMeta.Annotations),
			OwnerReferences: []metav1.OwnerReference{OwnerRef(rs)},
		},
		Spec: *t.Spec.DeepCopy(),
	}
}

// OwnerRef is the controller reference a replica set puts on its VMIs.
func OwnerRef(rs *v1.VirtualMachineInstanceReplicaSet) metav1.OwnerReference {
	return *metav1.NewControllerRef(rs, v1.SchemeGroupVersion.WithKind(Kind))
}

func (c *Controller) createVMI(ctx context.Context, key string, rs *v1.VirtualMachineInstanceReplicaSet) error {
	vmi, err := c.d.Client.VirtualMachineInstances(rs.Namespace).Create(ctx, NewVMI(rs), metav1.CreateOptions{FieldManager: v1.ManagerController})
	if err != nil {
		c.expect.Created(key) // it will never show up
		c.d.Recorder.Eventf(rs, corev1.EventTypeWarning, EventFailedCreate, "Error creating VirtualMachineInstance: %v", err)
		return &createError{fmt.Errorf("create vmi for replica set %s: %w", key, err)}
	}
	c.d.Recorder.Eventf(rs, corev1.EventTypeNormal, EventCreated, "Created VirtualMachineInstance %s", vmi.Name)
	return nil
}

func (c *Controller) deleteVMI(ctx context.Context, key string, rs *v1.VirtualMachineInstanceReplicaSet, vmi *v1.VirtualMachineInstance) error {
	uid := vmi.UID
	err := c.d.Client.VirtualMachineInstances(vmi.Namespace).Delete(ctx, vmi.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &uid},
	})
	switch {
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		c.expect.Deleted(key, uid) // already gone (or replaced): nothing to wait for
		return nil
	case err != nil:
		c.expect.Deleted(key, uid)
		c.d.Recorder.Eventf(rs, corev1.EventTypeWarning, EventFailedDelete, "Error deleting VirtualMachineInstance %s: %v", vmi.Name, err)
		return &deleteError{fmt.Errorf("delete vmi %s/%s of replica set %s: %w", vmi.Namespace, vmi.Name, key, err)}
	}
	c.d.Recorder.Eventf(rs, corev1.EventTypeNormal, EventDeleted, "Deleted VirtualMachineInstance %s (phase %q)", vmi.Name, vmi.Status.Phase)
	return nil
}

// writeStatus replaces the status if it changed. The replica set
// controller is the only writer of replica set status.
func (c *Controller) writeStatus(ctx context.Context, rs *v1.VirtualMachineInstanceReplicaSet, status v1.VirtualMachineInstanceReplicaSetStatus) error {
	if equality.Semantic.DeepEqual(rs.Status, status) {
		return nil
	}
	wasPaused := hasCondition(rs.Status.Conditions, v1.VirtualMachineInstanceReplicaSetReplicaPaused)
	nowPaused := hasCondition(status.Conditions, v1.VirtualMachineInstanceReplicaSetReplicaPaused)
	rs = rs.DeepCopy()
	rs.Status = status
	_, err := c.d.Client.VirtualMachineInstanceReplicaSets(rs.Namespace).UpdateStatus(ctx, rs, metav1.UpdateOptions{FieldManager: v1.ManagerController})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("update status of replica set %s/%s: %w", rs.Namespace, rs.Name, err)
	}
	switch {
	case nowPaused && !wasPaused:
		c.d.Recorder.Eventf(rs, corev1.EventTypeNormal, EventPaused, "Paused")
	case wasPaused && !nowPaused:
		c.d.Recorder.Eventf(rs, corev1.EventTypeNormal, EventResumed, "Resumed")
	}
	return nil
}

func hasCondition(conds []v1.VirtualMachineInstanceReplicaSetCondition, t v1.VirtualMachineInstanceReplicaSetConditionType) bool {
	for _, c := range conds {
		if c.Type == t {
			return true
		}
	}
	return false
}

// createError and deleteError mark which kind of replica change failed,
// for the ReplicaFailure condition's reason.
type createError struct{ error }

func (e *createError) Unwrap() error { return e.error }

type deleteError struct{ error }

func (e *deleteError) Unwrap() error { return e.error }

// failureReason is the ReplicaFailure reason for err: FailedCreate or
// FailedDelete, "" when no create or delete failed.
func failureReason(err error) string {
	var ce *createError
	var de *deleteError
	switch {
	case errors.As(err, &ce):
		return EventFailedCreate
	case errors.As(err, &de):
		return EventFailedDelete
	}
	return ""
}
