package snapshot

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	snapshotv1 "github.com/nodevirt/nodevirt/cluster/api/snapshot/v1beta1"
	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	kvclient "github.com/nodevirt/nodevirt/cluster/client/clientset/versioned/typed/api/v1"
	snapclient "github.com/nodevirt/nodevirt/cluster/client/clientset/versioned/typed/snapshot/v1beta1"
	kvlisters "github.com/nodevirt/nodevirt/cluster/client/listers/api/v1"
	snaplisters "github.com/nodevirt/nodevirt/cluster/client/listers/snapshot/v1beta1"
)

// Events the controller records on snapshots.
const (
	EventSucceeded = "SuccessfulVirtualMachineSnapshot"
	EventFailed    = "VirtualMachineSnapshotFailed"
	EventFrozen    = "GuestFrozen"
	EventThawed    = "GuestThawed"
)

// MaxFreeze bounds the unfreezeTimeout an online snapshot asks for.
const MaxFreeze = 5 * time.Minute

// progressRetry is how soon an in-progress snapshot is looked at again:
// the CSI objects it waits for are read, not watched (their API may be
// installed after the controller started). frozenRetry is the same while
// the guest is frozen: the thaw follows the cut within it.
const (
	progressRetry = 500 * time.Millisecond
	frozenRetry   = 25 * time.Millisecond
)

// Freezer freezes and thaws a running VMI's guest filesystems through the
// subresource API (freeze.go).
type Freezer interface {
	Freeze(ctx context.Context, namespace, name string, unfreezeTimeout time.Duration) error
	Unfreeze(ctx context.Context, namespace, name string) error
}

// CSI is what the controller needs of the CSI snapshot API.
type CSI interface {
	// VolumeSnapshot returns nil, nil when it does not exist.
	VolumeSnapshot(ctx context.Context, namespace, name string) (*snapv1.VolumeSnapshot, error)
	CreateVolumeSnapshot(ctx context.Context, vs *snapv1.VolumeSnapshot) error
	// ClassFor returns the VolumeSnapshotClass for claims of pvc's
	// storage, or "" and why there is none.
	ClassFor(ctx context.Context, pvc *corev1.PersistentVolumeClaim) (class, why string, err error)
}

// Enqueuer requeues a key later.
type Enqueuer interface {
	EnqueueAfter(key string, d time.Duration)
}

// Deps are the controller's collaborators.
type Deps struct {
	Snapshots snaplisters.VirtualMachineSnapshotLister
	Contents  snaplisters.VirtualMachineSnapshotContentLister
	VMs       kvlisters.VirtualMachineLister
	VMIs      kvlisters.VirtualMachineInstanceLister
	PVCs      corelisters.PersistentVolumeClaimLister
	API       snapclient.SnapshotV1beta1Interface
	VMAPI     kvclient.VirtualMachinesGetter
	CSI       CSI
	Freezer   Freezer
	Recorder  record.EventRecorder
	Queue     Enqueuer // may be nil in tests
	Now       func() time.Time
}

// Controller reconciles VirtualMachineSnapshots.
type Controller struct{ d Deps }

// New returns a controller.
func New(d Deps) *Controller {
	if d.Now == nil {
		d.Now = time.Now
	}
	return &Controller{d: d}
}

// Sync reconciles the snapshot named by key.
func (c *Controller) Sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return fmt.Errorf("snapshot key %q: %w", key, err)
	}
	s, err := c.d.Snapshots.VirtualMachineSnapshots(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get snapshot %s: %w", key, err)
	}
	s = s.DeepCopy()
	if s.Status == nil {
		s.Status = &snapshotv1.VirtualMachineSnapshotStatus{}
	}
	if s.DeletionTimestamp != nil {
		return c.finish(ctx, s)
	}
	if final(s) {
		return c.release(ctx, s)
	}
	if !slices.Contains(s.Finalizers, Finalizer) {
		s.Finalizers = append(s.Finalizers, Finalizer)
		updated, err := c.d.API.VirtualMachineSnapshots(ns).Update(ctx, s, metav1.UpdateOptions{FieldManager: v1.ManagerController})
		if err != nil {
			return fmt.Errorf("snapshot %s: add finalizer: %w", key, err)
		}
		updated.Status = s.Status
		s = updated
	}
	before := s.Status.DeepCopy()
	retry, err := c.progress(ctx, s)
	if werr := c.writeStatus(ctx, s, before); werr != nil {
		return errors.Join(err, werr)
	}
	if err != nil {
		return err
	}
	if final(s) {
		return c.release(ctx, s)
	}
	if retry > 0 && c.d.Queue != nil {
		c.d.Queue.EnqueueAfter(key, retry)
	}
	return nil
}

// final reports whether s has ended (Succeeded or Failed).
func final(s *snapshotv1.VirtualMachineSnapshot) bool {
	return s.Status.Phase == snapshotv1.Succeeded || s.Status.Phase == snapshotv1.Failed
}

// hold makes s the VM's snapshot in progress (status.snapshotInProgress)
// before anything is captured; false while another snapshot holds it. A
// missing VM is not held (the snapshot waits for it elsewhere).
func (c *Controller) hold(ctx context.Context, s *snapshotv1.VirtualMachineSnapshot) (bool, error) {
	vm, err := c.d.VMs.VirtualMachines(s.Namespace).Get(s.Spec.Source.Name)
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("get vm %s/%s: %w", s.Namespace, s.Spec.Source.Name, err)
	}
	switch holder(vm, fieldSnapshot) {
	case s.Name:
		return true, nil
	case "":
		return true, setHolder(ctx, c.d.VMAPI, vm, fieldSnapshot, s.Name)
	}
	return false, nil
}

// release clears the VM's status.snapshotInProgress if s holds it.
func (c *Controller) release(ctx context.Context, s *snapshotv1.VirtualMachineSnapshot) error {
	return releaseHolder(ctx, c.d.VMAPI, s.Namespace, s.Spec.Source.Name, fieldSnapshot, s.Name)
}

// progress moves an in-progress snapshot on: capture the VM in a content,
// freeze a guest that has an agent, cut the volume snapshots, thaw, then
// wait until they are ready. It edits s.Status and says when to look
// again.
func (c *Controller) progress(ctx context.Context, s *snapshotv1.VirtualMachineSnapshot) (time.Duration, error) {
	now := metav1.NewTime(c.d.Now())
	st := s.Status
	if st.Phase == snapshotv1.PhaseUnset {
		st.Phase = snapshotv1.InProgress
		st.ReadyToUse = ptr.To(false)
		st.Conditions = setCondition(st.Conditions, snapshotv1.ConditionProgressing, corev1.ConditionTrue, "Operation in progress", "", now)
		st.Conditions = setCondition(st.Conditions, snapshotv1.ConditionReady, corev1.ConditionFalse, "Not ready", "", now)
	}
	deadline := Deadline(s)
	overdue := !deadline.IsZero() && !now.Time.Before(deadline)
	if st.CreationTime == nil {
		held, err := c.hold(ctx, s)
		if err != nil {
			return 0, err
		}
		if !held {
			if overdue {
				return 0, c.fail(ctx, s, nil, "another snapshot of "+s.Spec.Source.Name+" was in progress until the failure deadline", now)
			}
			st.Conditions = setCondition(st.Conditions, snapshotv1.ConditionProgressing, corev1.ConditionFalse, "Waiting", "another snapshot of the VM is in progress", now)
			return progressRetry * 2, nil
		}
	}

	content, err := c.content(ctx, s)
	if err != nil {
		return 0, err
	}
	if content == nil {
		if overdue {
			return 0, c.fail(ctx, s, nil, "snapshot source "+s.Spec.Source.Name+" not found within the failure deadline", now)
		}
		st.Conditions = setCondition(st.Conditions, snapshotv1.ConditionProgressing, corev1.ConditionFalse, "Source does not exist", "", now)
		return progressRetry * 4, nil
	}
	observed := map[string]*snapv1.VolumeSnapshot{}
	for _, b := range content.Spec.VolumeBackups {
		vs, err := c.d.CSI.VolumeSnapshot(ctx, s.Namespace, *b.VolumeSnapshotName)
		if err != nil {
			return 0, err
		}
		observed[*b.VolumeSnapshotName] = vs
	}
	cut, statuses := CutOf(content, observed)

	if st.CreationTime == nil {
		switch {
		case cut.Err != "":
			return 0, c.fail(ctx, s, content, cut.Err, now)
		case overdue:
			return 0, c.fail(ctx, s, content, "snapshot did not complete within its failure deadline", now)
		case !cut.All:
			if err := c.freezeOnce(ctx, s, deadline); err != nil {
				return 0, err
			}
			for _, b := range content.Spec.VolumeBackups {
				if observed[*b.VolumeSnapshotName] != nil {
					continue
				}
				class, _, err := c.d.CSI.ClassFor(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: b.PersistentVolumeClaim.ObjectMeta, Spec: b.PersistentVolumeClaim.Spec})
				if err != nil {
					return 0, err
				}
				if err := c.d.CSI.CreateVolumeSnapshot(ctx, VolumeSnapshot(content, b, class)); err != nil && !apierrors.IsAlreadyExists(err) {
					return 0, fmt.Errorf("snapshot %s/%s: create volume snapshot %s: %w", s.Namespace, s.Name, *b.VolumeSnapshotName, err)
				}
			}
			if hasIndication(st, snapshotv1.IndicationGuestAgent) {
				return frozenRetry, nil
			}
			return progressRetry, nil
		}
		// Every volume snapshot is cut: the guest may go on.
		if err := c.thaw(ctx, s); err != nil {
			return 0, err
		}
		st.CreationTime = cut.Time
		if st.CreationTime == nil {
			st.CreationTime = &now
		}
	}
	if err := c.writeContentStatus(ctx, content, cut, statuses, st.CreationTime); err != nil {
		return 0, err
	}
	if cut.Err != "" {
		return 0, c.fail(ctx, s, content, cut.Err, now)
	}
	if !cut.Ready {
		return progressRetry, nil
	}
	st.Phase = snapshotv1.Succeeded
	st.ReadyToUse = ptr.To(true)
	st.Error = nil
	st.Conditions = setCondition(st.Conditions, snapshotv1.ConditionProgressing, corev1.ConditionFalse, "Operation complete", "", now)
	st.Conditions = setCondition(st.Conditions, snapshotv1.ConditionReady, corev1.ConditionTrue, "Operation complete", "", now)
	c.d.Recorder.Eventf(s, corev1.EventTypeNormal, EventSucceeded, "Successfully completed VirtualMachineSnapshot %s", s.Name)
	return 0, nil
}

// content returns s's content, creating it from the VM when absent (nil
// when the VM does not exist). The content fixes what the snapshot holds:
// the VM's spec and the volumes included, as they were when it was made.
func (c *Controller) content(ctx context.Context, s *snapshotv1.VirtualMachineSnapshot) (*snapshotv1.VirtualMachineSnapshotContent, error) {
	existing, err := c.d.Contents.VirtualMachineSnapshotContents(s.Namespace).Get(ContentName(s))
	if err == nil {
		return existing, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("get content of snapshot %s/%s: %w", s.Namespace, s.Name, err)
	}
	vm, err := c.d.VMs.VirtualMachines(s.Namespace).Get(s.Spec.Source.Name)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get vm %s/%s: %w", s.Namespace, s.Spec.Source.Name, err)
	}
	claims := map[string]Claim{}
	if vm.Spec.Template != nil {
		for _, vol := range vm.Spec.Template.Spec.Volumes {
			if vol.PersistentVolumeClaim == nil {
				continue
			}
			name := vol.PersistentVolumeClaim.ClaimName
			pvc, err := c.d.PVCs.PersistentVolumeClaims(s.Namespace).Get(name)
			if apierrors.IsNotFound(err) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("get pvc %s/%s: %w", s.Namespace, name, err)
			}
			class, why, err := c.d.CSI.ClassFor(ctx, pvc)
			if err != nil {
				return nil, err
			}
			claims[name] = Claim{PVC: pvc, Class: class, Why: why}
		}
	}
	included, excluded := Volumes(vm, claims)
	st := s.Status
	st.SourceUID = ptr.To(vm.UID)
	st.VirtualMachineSnapshotContentName = ptr.To(ContentName(s))
	st.SnapshotVolumes = &snapshotv1.SnapshotVolumesLists{IncludedVolumes: included, ExcludedVolumes: slices.Sorted(maps.Keys(excluded))}
	if vmi, err := c.d.VMIs.VirtualMachineInstances(s.Namespace).Get(vm.Name); err == nil && vmi.Status.Phase == v1.Running {
		addIndication(st, snapshotv1.IndicationOnline)
		if !vmi.ConditionTrue(v1.VirtualMachineInstanceAgentConnected) {
			addIndication(st, snapshotv1.IndicationNoGuestAgent)
		}
	}
	for _, n := range slices.Sorted(maps.Keys(excluded)) {
		c.d.Recorder.Eventf(s, corev1.EventTypeNormal, "VolumeExcluded", "volume %s is not in the snapshot: %s", n, excluded[n])
	}
	content := Content(s, vm, claims, included)
	created, err := c.d.API.VirtualMachineSnapshotContents(s.Namespace).Create(ctx, content, metav1.CreateOptions{FieldManager: v1.ManagerController})
	if apierrors.IsAlreadyExists(err) {
		return c.d.API.VirtualMachineSnapshotContents(s.Namespace).Get(ctx, content.Name, metav1.GetOptions{})
	}
	if err != nil {
		return nil, fmt.Errorf("create content of snapshot %s/%s: %w", s.Namespace, s.Name, err)
	}
	return created, nil
}

// freezeOnce freezes the guest of an online snapshot whose guest agent
// is connected, until the snapshot's deadline at the latest (the node
// thaws it then whatever happens here). It is called again on every pass
// until the volume snapshots are cut; the freeze is renewed, not doubled.
// A failed freeze leaves the snapshot crash-consistent (QuiesceFailed).
func (c *Controller) freezeOnce(ctx context.Context, s *snapshotv1.VirtualMachineSnapshot, deadline time.Time) error {
	st := s.Status
	if !hasIndication(st, snapshotv1.IndicationOnline) || hasIndication(st, snapshotv1.IndicationNoGuestAgent) || hasIndication(st, snapshotv1.IndicationQuiesceFailed) {
		return nil
	}
	// The freeze lasts until the cut at most; the node thaws the guest by
	// the deadline or MaxFreeze, whichever comes first, should this
	// controller not come back to thaw it.
	timeout := MaxFreeze
	if !deadline.IsZero() {
		timeout = min(timeout, deadline.Sub(c.d.Now()))
	}
	if err := c.d.Freezer.Freeze(ctx, s.Namespace, s.Spec.Source.Name, timeout); err != nil {
		addIndication(st, snapshotv1.IndicationQuiesceFailed)
		c.d.Recorder.Eventf(s, corev1.EventTypeWarning, "QuiesceFailed", "freezing the guest failed, the snapshot is crash-consistent: %v", err)
		return nil
	}
	if !hasIndication(st, snapshotv1.IndicationGuestAgent) {
		addIndication(st, snapshotv1.IndicationGuestAgent)
		c.d.Recorder.Eventf(s, corev1.EventTypeNormal, EventFrozen, "froze the guest of %s until the volume snapshots are cut", s.Spec.Source.Name)
	}
	return nil
}

// thaw thaws the guest snapshot s froze, if it froze one and has not been
// cut yet. A failed thaw is returned (the key is retried); the node thaws
// the guest at the freeze's deadline in any case.
func (c *Controller) thaw(ctx context.Context, s *snapshotv1.VirtualMachineSnapshot) error {
	if !hasIndication(s.Status, snapshotv1.IndicationGuestAgent) || s.Status.CreationTime != nil {
		return nil
	}
	if err := c.d.Freezer.Unfreeze(ctx, s.Namespace, s.Spec.Source.Name); err != nil {
		return fmt.Errorf("snapshot %s/%s: thaw the guest: %w", s.Namespace, s.Name, err)
	}
	c.d.Recorder.Eventf(s, corev1.EventTypeNormal, EventThawed, "thawed the guest of %s", s.Spec.Source.Name)
	return nil
}

// fail thaws the guest and marks s Failed with message.
func (c *Controller) fail(ctx context.Context, s *snapshotv1.VirtualMachineSnapshot, content *snapshotv1.VirtualMachineSnapshotContent, message string, now metav1.Time) error {
	if err := c.thaw(ctx, s); err != nil {
		return err
	}
	st := s.Status
	st.Phase = snapshotv1.Failed
	st.ReadyToUse = ptr.To(false)
	st.Error = &snapshotv1.Error{Time: &now, Message: ptr.To(message)}
	st.Conditions = setCondition(st.Conditions, snapshotv1.ConditionProgressing, corev1.ConditionFalse, "Operation failed", message, now)
	st.Conditions = setCondition(st.Conditions, snapshotv1.ConditionFailure, corev1.ConditionTrue, "Operation failed", message, now)
	c.d.Recorder.Eventf(s, corev1.EventTypeWarning, EventFailed, "VirtualMachineSnapshot %s failed: %s", s.Name, message)
	if content != nil {
		want := &snapshotv1.VirtualMachineSnapshotContentStatus{}
		if content.Status != nil {
			want = content.Status.DeepCopy()
		}
		want.ReadyToUse, want.Error = ptr.To(false), st.Error
		if err := c.setContentStatus(ctx, content, want); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// writeContentStatus records the volume snapshots' state on the content.
func (c *Controller) writeContentStatus(ctx context.Context, content *snapshotv1.VirtualMachineSnapshotContent, cut Cut, statuses []snapshotv1.VolumeSnapshotStatus, created *metav1.Time) error {
	want := &snapshotv1.VirtualMachineSnapshotContentStatus{
		CreationTime: created, ReadyToUse: ptr.To(cut.Ready), VolumeSnapshotStatus: statuses,
	}
	if content.Status != nil {
		want.Error = content.Status.Error
	}
	return c.setContentStatus(ctx, content, want)
}

// setContentStatus writes want as content's status, unless it is that
// already.
func (c *Controller) setContentStatus(ctx context.Context, content *snapshotv1.VirtualMachineSnapshotContent, want *snapshotv1.VirtualMachineSnapshotContentStatus) error {
	if content.Status != nil && equality.Semantic.DeepEqual(content.Status, want) {
		return nil
	}
	cs := content.DeepCopy()
	cs.Status = want
	if _, err := c.d.API.VirtualMachineSnapshotContents(cs.Namespace).UpdateStatus(ctx, cs, metav1.UpdateOptions{FieldManager: v1.ManagerController}); err != nil {
		return fmt.Errorf("content %s/%s status: %w", cs.Namespace, cs.Name, err)
	}
	return nil
}

// writeStatus writes s's status when it changed from before.
func (c *Controller) writeStatus(ctx context.Context, s *snapshotv1.VirtualMachineSnapshot, before *snapshotv1.VirtualMachineSnapshotStatus) error {
	if equality.Semantic.DeepEqual(before, s.Status) {
		return nil
	}
	if _, err := c.d.API.VirtualMachineSnapshots(s.Namespace).UpdateStatus(ctx, s, metav1.UpdateOptions{FieldManager: v1.ManagerController}); err != nil {
		return fmt.Errorf("snapshot %s/%s status: %w", s.Namespace, s.Name, err)
	}
	return nil
}

// finish handles a deleted snapshot: a guest it froze is thawed, then the
// finalizer goes. The content goes with the snapshot by its owner
// reference (deletionPolicy Delete) and its volume snapshots with it;
// with Retain it stays.
func (c *Controller) finish(ctx context.Context, s *snapshotv1.VirtualMachineSnapshot) error {
	if !slices.Contains(s.Finalizers, Finalizer) {
		return nil
	}
	if err := c.thaw(ctx, s); err != nil {
		return err
	}
	if err := c.release(ctx, s); err != nil {
		return err
	}
	s.Finalizers = slices.DeleteFunc(s.Finalizers, func(f string) bool { return f == Finalizer })
	if _, err := c.d.API.VirtualMachineSnapshots(s.Namespace).Update(ctx, s, metav1.UpdateOptions{FieldManager: v1.ManagerController}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("snapshot %s/%s: remove finalizer: %w", s.Namespace, s.Name, err)
	}
	return nil
}

// SnapshotKeyOfContent is the key of the snapshot a content (an informer
// object, or its tombstone) belongs to.
func SnapshotKeyOfContent(obj any) (string, bool) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	c, ok := obj.(*snapshotv1.VirtualMachineSnapshotContent)
	if !ok || c.Spec.VirtualMachineSnapshotName == nil {
		return "", false
	}
	return c.Namespace + "/" + *c.Spec.VirtualMachineSnapshotName, true
}
