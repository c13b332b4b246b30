package snapshot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	snapshotv1 "github.com/nodevirt/nodevirt/cluster/api/snapshot/v1beta1"
	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	snaplisters "github.com/nodevirt/nodevirt/cluster/client/listers/snapshot/v1beta1"
)

// Events the restore loop records on restores.
const (
	EventRestoreComplete = "VirtualMachineRestoreComplete"
	EventRestoreWaiting  = "RestoreTargetNotReady"
	EventRestoreFailed   = "VirtualMachineRestoreError"
)

// RestoreDeps are the restore loop's collaborators beyond the snapshot
// loop's (Deps).
type RestoreDeps struct {
	Restores snaplisters.VirtualMachineRestoreLister
	PVCAPI   corev1client.PersistentVolumeClaimsGetter
}

// Restorer reconciles VirtualMachineRestores.
type Restorer struct {
	d  Deps
	rd RestoreDeps
}

// NewRestorer returns the restore loop's syncer.
func NewRestorer(d Deps, rd RestoreDeps) *Restorer {
	if d.Now == nil {
		d.Now = time.Now
	}
	return &Restorer{d: d, rd: rd}
}

// Sync reconciles the restore named by key.
func (c *Restorer) Sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return fmt.Errorf("restore key %q: %w", key, err)
	}
	r, err := c.rd.Restores.VirtualMachineRestores(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get restore %s: %w", key, err)
	}
	r = r.DeepCopy()
	if r.Status == nil {
		r.Status = &snapshotv1.VirtualMachineRestoreStatus{Complete: ptr.To(false)}
	}
	if r.DeletionTimestamp != nil {
		return c.finish(ctx, r)
	}
	if done(r) {
		return c.release(ctx, r)
	}
	if !slices.Contains(r.Finalizers, RestoreFinalizer) {
		r.Finalizers = append(r.Finalizers, RestoreFinalizer)
		updated, err := c.d.API.VirtualMachineRestores(ns).Update(ctx, r, metav1.UpdateOptions{FieldManager: v1.ManagerController})
		if err != nil {
			return fmt.Errorf("restore %s: add finalizer: %w", key, err)
		}
		updated.Status = r.Status
		r = updated
	}
	before := r.Status.DeepCopy()
	retry, err := c.progress(ctx, r)
	if !equality.Semantic.DeepEqual(before, r.Status) {
		if _, werr := c.d.API.VirtualMachineRestores(ns).UpdateStatus(ctx, r, metav1.UpdateOptions{FieldManager: v1.ManagerController}); werr != nil {
			return errors.Join(err, fmt.Errorf("restore %s status: %w", key, werr))
		}
	}
	if err != nil {
		return err
	}
	if done(r) {
		return c.release(ctx, r)
	}
	if retry > 0 && c.d.Queue != nil {
		c.d.Queue.EnqueueAfter(key, retry)
	}
	return nil
}

// done reports whether r completed or failed for good.
func done(r *snapshotv1.VirtualMachineRestore) bool {
	if r.Status.Complete != nil && *r.Status.Complete {
		return true
	}
	for _, c := range r.Status.Conditions {
		if c.Type == snapshotv1.ConditionFailure && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// progress moves a restore on: wait for a ready snapshot and a stopped
// target, take the target, create the claims, write the VM, complete.
func (c *Restorer) progress(ctx context.Context, r *snapshotv1.VirtualMachineRestore) (time.Duration, error) {
	now := metav1.NewTime(c.d.Now())
	st := r.Status
	wait := func(reason, message string) (time.Duration, error) {
		st.Conditions = setCondition(st.Conditions, snapshotv1.ConditionProgressing, corev1.ConditionFalse, reason, message, now)
		st.Conditions = setCondition(st.Conditions, snapshotv1.ConditionReady, corev1.ConditionFalse, reason, message, now)
		return time.Second, nil
	}
	snap, err := c.d.Snapshots.VirtualMachineSnapshots(r.Namespace).Get(r.Spec.VirtualMachineSnapshotName)
	if apierrors.IsNotFound(err) {
		return wait("Waiting for snapshot", fmt.Sprintf("VirtualMachineSnapshot %s does not exist", r.Spec.VirtualMachineSnapshotName))
	}
	if err != nil {
		return 0, err
	}
	if snap.Status == nil || snap.Status.Phase != snapshotv1.Succeeded || snap.Status.ReadyToUse == nil || !*snap.Status.ReadyToUse || snap.Status.VirtualMachineSnapshotContentName == nil {
		return wait("Waiting for snapshot", fmt.Sprintf("VirtualMachineSnapshot %s is not ready to use", snap.Name))
	}
	content, err := c.d.Contents.VirtualMachineSnapshotContents(r.Namespace).Get(*snap.Status.VirtualMachineSnapshotContentName)
	if err != nil {
		return 0, fmt.Errorf("get content of snapshot %s: %w", snap.Name, err)
	}

	target, err := c.d.VMs.VirtualMachines(r.Namespace).Get(r.Spec.Target.Name)
	switch {
	case apierrors.IsNotFound(err):
		target = nil
	case err != nil:
		return 0, err
	}
	// A target r already wrote (its status write was lost) is not a
	// target to stop: r only has its status left to write.
	written := target != nil && RestoredBy(target, r)
	if target != nil && !written {
		ready, retry, err := c.targetStopped(ctx, r, target, now)
		if err != nil || !ready {
			return retry, err
		}
	}

	st.Conditions = setCondition(st.Conditions, snapshotv1.ConditionProgressing, corev1.ConditionTrue, "Creating new PVCs", "", now)
	st.Restores = nil
	for _, b := range content.Spec.VolumeBackups {
		if b.VolumeSnapshotName == nil {
			continue
		}
		vs, err := c.d.CSI.VolumeSnapshot(ctx, r.Namespace, *b.VolumeSnapshotName)
		if err != nil {
			return 0, err
		}
		if vs == nil {
			return 0, c.failRestore(r, fmt.Sprintf("volume snapshot %s of volume %s is gone", *b.VolumeSnapshotName, b.VolumeName), now)
		}
		pvc := RestoredClaim(r, b, vs)
		if target != nil {
			pvc.OwnerReferences = []metav1.OwnerReference{vmOwner(target)}
		}
		if _, err := c.rd.PVCAPI.PersistentVolumeClaims(r.Namespace).Create(ctx, pvc, metav1.CreateOptions{FieldManager: v1.ManagerController}); err != nil && !apierrors.IsAlreadyExists(err) {
			return 0, fmt.Errorf("restore %s/%s: create claim %s: %w", r.Namespace, r.Name, pvc.Name, err)
		}
		st.Restores = append(st.Restores, snapshotv1.VolumeRestore{VolumeName: b.VolumeName, PersistentVolumeClaimName: pvc.Name, VolumeSnapshotName: *b.VolumeSnapshotName})
	}

	want, err := RestoredSpec(r, content, target)
	if err != nil {
		return 0, c.failRestore(r, err.Error(), now)
	}
	switch {
	case written:
		// The VM r created may have died before it owned its claims.
		if err := c.ownClaims(ctx, r, target); err != nil {
			return 0, err
		}
	case target == nil:
		created, err := c.d.VMAPI.VirtualMachines(r.Namespace).Create(ctx, want, metav1.CreateOptions{FieldManager: v1.ManagerController})
		if apierrors.IsAlreadyExists(err) {
			// The cache is behind: r created it a round ago, or someone
			// else did since, and it is a target to stop.
			if created, err = c.d.VMAPI.VirtualMachines(r.Namespace).Get(ctx, want.Name, metav1.GetOptions{}); err != nil {
				return 0, fmt.Errorf("restore %s/%s: get VM %s: %w", r.Namespace, r.Name, want.Name, err)
			}
			if !RestoredBy(created, r) {
				return 0, fmt.Errorf("restore %s/%s: VM %s appeared meanwhile; it is restored as an existing target once the cache has it", r.Namespace, r.Name, want.Name)
			}
		} else if err != nil {
			return 0, c.failRestore(r, fmt.Sprintf("create VM %s: %v", want.Name, err), now)
		}
		if err := c.ownClaims(ctx, r, created); err != nil {
			return 0, err
		}
	default:
		if _, err := c.d.VMAPI.VirtualMachines(r.Namespace).Update(ctx, want, metav1.UpdateOptions{FieldManager: v1.ManagerController}); err != nil {
			return 0, fmt.Errorf("restore %s/%s: update VM %s: %w", r.Namespace, r.Name, want.Name, err)
		}
	}
	st.Complete = ptr.To(true)
	st.RestoreTime = &now
	st.Conditions = setCondition(st.Conditions, snapshotv1.ConditionProgressing, corev1.ConditionFalse, "Operation complete", "", now)
	st.Conditions = setCondition(st.Conditions, snapshotv1.ConditionReady, corev1.ConditionTrue, "Operation complete", "", now)
	c.d.Recorder.Eventf(r, corev1.EventTypeNormal, EventRestoreComplete, "Successfully completed VirtualMachineRestore %s", r.Name)
	return 0, nil
}

// targetStopped makes sure an existing target is stopped and held (its
// status.restoreInProgress names r, so it does not start) before it is
// restored, as r's targetReadinessPolicy says.
func (c *Restorer) targetStopped(ctx context.Context, r *snapshotv1.VirtualMachineRestore, target *v1.VirtualMachine, now metav1.Time) (bool, time.Duration, error) {
	switch holder(target, fieldRestore) {
	case r.Name:
	case "":
		if err := setHolder(ctx, c.d.VMAPI, target, fieldRestore, r.Name); err != nil {
			return false, 0, err
		}
	default:
		r.Status.Conditions = setCondition(r.Status.Conditions, snapshotv1.ConditionProgressing, corev1.ConditionFalse, "Waiting",
			fmt.Sprintf("VirtualMachineRestore %s of VM %s is in progress", holder(target, fieldRestore), target.Name), now)
		return false, 2 * time.Second, nil
	}
	vmi, err := c.d.VMIs.VirtualMachineInstances(r.Namespace).Get(target.Name)
	if apierrors.IsNotFound(err) {
		return true, 0, nil
	}
	if err != nil {
		return false, 0, err
	}
	policy := snapshotv1.WaitGracePeriod
	if r.Spec.TargetReadinessPolicy != nil {
		policy = *r.Spec.TargetReadinessPolicy
	}
	message := fmt.Sprintf("the target VM %s must be stopped before it is restored: its VMI is %s (targetReadinessPolicy %s)", target.Name, phaseOf(vmi), policy)
	switch policy {
	case snapshotv1.FailImmediate:
		return false, 0, c.failRestore(r, message, now)
	case snapshotv1.WaitGracePeriod:
		if !now.Time.Before(r.CreationTimestamp.Add(RestoreGracePeriod)) {
			return false, 0, c.failRestore(r, message+": not stopped within "+RestoreGracePeriod.String(), now)
		}
	case snapshotv1.StopTarget:
		if ptr.Deref(target.Spec.RunStrategy, "") != v1.RunStrategyHalted {
			patch := []byte(`{"spec":{"runStrategy":"Halted","running":null}}`)
			if _, err := c.d.VMAPI.VirtualMachines(target.Namespace).Patch(ctx, target.Name, types.MergePatchType, patch, patchOptions); err != nil {
				return false, 0, fmt.Errorf("restore %s/%s: stop VM %s: %w", r.Namespace, r.Name, target.Name, err)
			}
		}
	}
	if !hasConditionReason(r.Status.Conditions, snapshotv1.ConditionReady, "Waiting for target to be ready") {
		c.d.Recorder.Eventf(r, corev1.EventTypeWarning, EventRestoreWaiting, "%s", message)
	}
	r.Status.Conditions = setCondition(r.Status.Conditions, snapshotv1.ConditionProgressing, corev1.ConditionFalse, "Waiting for target to be ready", message, now)
	r.Status.Conditions = setCondition(r.Status.Conditions, snapshotv1.ConditionReady, corev1.ConditionFalse, "Waiting for target to be ready", message, now)
	return false, time.Second, nil
}

// failRestore marks r failed for good with message.
func (c *Restorer) failRestore(r *snapshotv1.VirtualMachineRestore, message string, now metav1.Time) error {
	st := r.Status
	st.Conditions = setCondition(st.Conditions, snapshotv1.ConditionProgressing, corev1.ConditionFalse, "Operation failed", message, now)
	st.Conditions = setCondition(st.Conditions, snapshotv1.ConditionReady, corev1.ConditionFalse, "Operation failed", message, now)
	st.Conditions = setCondition(st.Conditions, snapshotv1.ConditionFailure, corev1.ConditionTrue, "Operation failed", message, now)
	c.d.Recorder.Eventf(r, corev1.EventTypeWarning, EventRestoreFailed, "VirtualMachineRestore %s failed: %s", r.Name, message)
	return nil
}

// ownClaims makes the VM a restore created the owner of the claims it
// restored for it (they go when the VM goes, as a VM's own claims do).
func (c *Restorer) ownClaims(ctx context.Context, r *snapshotv1.VirtualMachineRestore, vm *v1.VirtualMachine) error {
	for _, rs := range r.Status.Restores {
		pvc, err := c.rd.PVCAPI.PersistentVolumeClaims(r.Namespace).Get(ctx, rs.PersistentVolumeClaimName, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("restore %s/%s: get claim %s: %w", r.Namespace, r.Name, rs.PersistentVolumeClaimName, err)
		}
		if len(pvc.OwnerReferences) > 0 {
			continue
		}
		// A patch, not an update: the claim is being provisioned, and
		// the provisioner's writes to it would make an update conflict.
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"ownerReferences": []metav1.OwnerReference{vmOwner(vm)}}})
		if err != nil {
			return err
		}
		if _, err := c.rd.PVCAPI.PersistentVolumeClaims(r.Namespace).Patch(ctx, pvc.Name, types.StrategicMergePatchType, patch, patchOptions); err != nil {
			return fmt.Errorf("restore %s/%s: own claim %s: %w", r.Namespace, r.Name, pvc.Name, err)
		}
	}
	return nil
}

// release clears the target's status.restoreInProgress if r holds it.
func (c *Restorer) release(ctx context.Context, r *snapshotv1.VirtualMachineRestore) error {
	return releaseHolder(ctx, c.d.VMAPI, r.Namespace, r.Spec.Target.Name, fieldRestore, r.Name)
}

// finish handles a deleted restore: its target is released, then the
// finalizer goes. Restored claims stay (the VM may use them).
func (c *Restorer) finish(ctx context.Context, r *snapshotv1.VirtualMachineRestore) error {
	if !slices.Contains(r.Finalizers, RestoreFinalizer) {
		return nil
	}
	if err := c.release(ctx, r); err != nil {
		return err
	}
	r.Finalizers = slices.DeleteFunc(r.Finalizers, func(f string) bool { return f == RestoreFinalizer })
	if _, err := c.d.API.VirtualMachineRestores(r.Namespace).Update(ctx, r, metav1.UpdateOptions{FieldManager: v1.ManagerController}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("restore %s/%s: remove finalizer: %w", r.Namespace, r.Name, err)
	}
	return nil
}

func vmOwner(vm *v1.VirtualMachine) metav1.OwnerReference {
	return *metav1.NewControllerRef(vm, v1.SchemeGroupVersion.WithKind("VirtualMachine"))
}

func phaseOf(vmi *v1.VirtualMachineInstance) string {
	if vmi.Status.Phase == "" {
		return "Pending"
	}
	return string(vmi.Status.Phase)
}

func hasConditionReason(conds []snapshotv1.Condition, t snapshotv1.ConditionType, reason string) bool {
	for _, c := range conds {
		if c.Type == t {
			return c.Reason == reason
		}
	}
	return false
}
