package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	snapshotv1 "github.com/nodevirt/nodevirt/cluster/api/snapshot/v1beta1"
	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// snapshotClass is the local cluster's CSI StorageClass and
// VolumeSnapshotClass (hack/cluster/csi.sh).
const snapshotClass = "nodevirt-csi"

// snapshotVM is the snapshot scenario's VM name (and its claim's).
const snapshotVM = "snap-bench"

// scratchFS (guest user-data) mounts an ext4 file system on the 16 MiB
// scratch disk: something qemu-ga freezes (the initramfs root cannot be).
const scratchFS = `for _ in $(seq 1 100); do grep -q ext4 /proc/filesystems && break; sleep 0.1; done
sd=; for b in /sys/block/vd*; do [ "$(cat $b/size)" = 32768 ] && sd=/dev/${b##*/}; done
mke2fs -q "$sd" && mkdir -p /mnt/scratch && mount -t ext4 "$sd" /mnt/scratch && echo NODEVIRT-SCRATCH-MOUNTED >/dev/console`

// runSnapshot measures VM snapshots and restores of a running VM with a
// 1 GiB claim of the local CSI driver and an ext4 file system the guest
// agent freezes, each beside its floor measured just before in the same
// run: a bare CSI VolumeSnapshot of the claim (created → readyToUse), the
// node API's freeze and unfreeze without the controller, and a claim
// restored from a VolumeSnapshot (created → Bound).
func runSnapshot(ctx context.Context, e *env, r *Report, cycles int) error {
	const sc = "snapshot"
	var floorVS, floorFreeze, floorClaim, snapReady, window, restored []time.Duration
	defer func() {
		r.add(
			summarize(sc, "bare CSI VolumeSnapshot of the 1 GiB claim: created → readyToUse (the floor)", "s", seconds(floorVS)),
			summarize(sc, "online VM snapshot: created → Succeeded and readyToUse", "s", seconds(snapReady)),
			summarize(sc, "node API freeze + unfreeze, no controller (the floor of the window)", "ms", millis(floorFreeze)),
			summarize(sc, "online VM snapshot: guest frozen → thawed (the node agent's timeline)", "ms", millis(window)),
			summarize(sc, "bare claim from a VolumeSnapshot: created → Bound (the floor)", "s", seconds(floorClaim)),
			summarize(sc, "VM restore of the stopped VM: created → complete", "s", seconds(restored)),
		)
	}()
	if err := e.cluster.Script(ctx, "csi.sh"); err != nil {
		return err
	}
	defer e.cleanSnapshots(context.WithoutCancel(ctx), cycles)
	if err := e.createClaim(ctx, snapshotVM, "1Gi", nil); err != nil {
		return err
	}
	if err := e.startSnapshotVM(ctx); err != nil {
		return err
	}
	for i := range cycles {
		d, err := e.bareVolumeSnapshot(ctx, fmt.Sprintf("floor-%d", i))
		if err != nil {
			return err
		}
		floorVS = append(floorVS, d)
		start := time.Now()
		if err := e.vmiAction(ctx, snapshotVM, "freeze"); err != nil {
			return err
		}
		if err := e.vmiAction(ctx, snapshotVM, "unfreeze"); err != nil {
			return err
		}
		floorFreeze = append(floorFreeze, time.Since(start))

		name := fmt.Sprintf("snap-%d", i)
		if d, err = e.vmSnapshot(ctx, name); err != nil {
			return err
		}
		snapReady = append(snapReady, d)
		w, err := e.freezeWindow(ctx)
		if err != nil {
			return err
		}
		window = append(window, w)
	}

	// Restores need the VM stopped.
	patch := []byte(`{"spec":{"runStrategy":"Halted"}}`)
	if _, err := e.virt.KubevirtV1().VirtualMachines(benchNamespace).Patch(ctx, snapshotVM, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("stop VM %s: %w", snapshotVM, err)
	}
	if err := poll(ctx, 2*time.Minute, 200*time.Millisecond, "VMI "+snapshotVM+" gone", func() (bool, error) {
		_, err := e.virt.KubevirtV1().VirtualMachineInstances(benchNamespace).Get(ctx, snapshotVM, getOpts)
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		return err
	}
	for i := range cycles {
		vs := fmt.Sprintf("floor-%d", i)
		src := &corev1.TypedLocalObjectReference{APIGroup: ptr.To(snapv1.GroupName), Kind: "VolumeSnapshot", Name: vs}
		start := time.Now()
		claim := fmt.Sprintf("floor-claim-%d", i)
		if err := e.createClaim(ctx, claim, "1Gi", src); err != nil {
			return err
		}
		floorClaim = append(floorClaim, time.Since(start))
		d, err := e.vmRestore(ctx, fmt.Sprintf("restore-%d", i), fmt.Sprintf("snap-%d", i))
		if err != nil {
			return err
		}
		restored = append(restored, d)
	}
	r.note(sc, "A VM (the single scenario's guest) with a 1 GiB Filesystem claim of the local CSI driver (hack/csihostpath: a snapshot is a sparse copy) and a 16 MiB ext4 file system the guest agent freezes; %d online snapshots (guest agent connected) while it runs, then %d restores onto it stopped. Each floor is measured just before its figure.", cycles, cycles)
	return nil
}

// createClaim creates a Filesystem claim of the CSI class (from src when
// set) and waits until it is bound.
func (e *env) createClaim(ctx context.Context, name, size string, src *corev1.TypedLocalObjectReference) error {
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: benchNamespace},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: ptr.To(snapshotClass),
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
			DataSource:       src,
		},
	}
	if _, err := e.kube.CoreV1().PersistentVolumeClaims(benchNamespace).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create claim %s: %w", name, err)
	}
	return poll(ctx, time.Minute, 50*time.Millisecond, "claim "+name+" Bound", func() (bool, error) {
		got, err := e.kube.CoreV1().PersistentVolumeClaims(benchNamespace).Get(ctx, name, getOpts)
		return err == nil && got.Status.Phase == corev1.ClaimBound, err
	})
}

// startSnapshotVM creates the VM: the single scenario's guest with the
// claim and a scratch disk it formats ext4, and waits until its guest
// agent is connected.
func (e *env) startSnapshotVM(ctx context.Context) error {
	vmi, err := newVMI(bootVMI, snapshotVM)
	if err != nil {
		return err
	}
	spec := vmi.Spec
	spec.Domain.Devices.Disks = append(spec.Domain.Devices.Disks,
		v1.Disk{Name: "data", Disk: &v1.DiskTarget{Bus: v1.DiskBusVirtio}},
		v1.Disk{Name: "scratch", Disk: &v1.DiskTarget{Bus: v1.DiskBusVirtio}})
	spec.Volumes = append(spec.Volumes,
		v1.Volume{Name: "data", PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: snapshotVM}},
		v1.Volume{Name: "scratch", EmptyDisk: &v1.EmptyDiskSource{Capacity: resource.MustParse("16Mi")}})
	for i := range spec.Volumes {
		if ci := spec.Volumes[i].CloudInitNoCloud; ci != nil {
			ci.UserData = "#!/bin/sh\n" + scratchFS + "\n"
		}
	}
	vm := &v1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: snapshotVM, Namespace: benchNamespace, Labels: vmi.Labels},
		Spec: v1.VirtualMachineSpec{RunStrategy: ptr.To(v1.RunStrategyAlways), Template: &v1.VirtualMachineInstanceTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: vmi.Labels}, Spec: spec}},
	}
	if _, err := e.virt.KubevirtV1().VirtualMachines(benchNamespace).Create(ctx, vm, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create VM %s: %w", snapshotVM, err)
	}
	if err := poll(ctx, 3*time.Minute, 100*time.Millisecond, "VMI "+snapshotVM+" Running", func() (bool, error) {
		got, err := e.virt.KubevirtV1().VirtualMachineInstances(benchNamespace).Get(ctx, snapshotVM, getOpts)
		return err == nil && got.Status.Phase == v1.Running, nil
	}); err != nil {
		return err
	}
	if _, err := e.waitConsole(ctx, snapshotVM, "NODEVIRT-SCRATCH-MOUNTED", 3*time.Minute); err != nil {
		return err
	}
	return poll(ctx, 2*time.Minute, 100*time.Millisecond, "VMI "+snapshotVM+" AgentConnected", func() (bool, error) {
		got, err := e.virt.KubevirtV1().VirtualMachineInstances(benchNamespace).Get(ctx, snapshotVM, getOpts)
		if err != nil {
			return false, nil
		}
		for _, c := range got.Status.Conditions {
			if c.Type == v1.VirtualMachineInstanceAgentConnected {
				return c.Status == corev1.ConditionTrue, nil
			}
		}
		return false, nil
	})
}

// bareVolumeSnapshot cuts a CSI VolumeSnapshot of the VM's claim directly
// and returns created → readyToUse. It is kept: the restore floor uses it.
func (e *env) bareVolumeSnapshot(ctx context.Context, name string) (time.Duration, error) {
	vs := &snapv1.VolumeSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: benchNamespace},
		Spec: snapv1.VolumeSnapshotSpec{Source: snapv1.VolumeSnapshotSource{PersistentVolumeClaimName: ptr.To(snapshotVM)},
			VolumeSnapshotClassName: ptr.To(snapshotClass)},
	}
	start := time.Now()
	if _, err := e.csi.SnapshotV1().VolumeSnapshots(benchNamespace).Create(ctx, vs, metav1.CreateOptions{}); err != nil {
		return 0, fmt.Errorf("create volume snapshot %s: %w", name, err)
	}
	err := poll(ctx, time.Minute, 20*time.Millisecond, "volume snapshot "+name+" ready", func() (bool, error) {
		got, err := e.csi.SnapshotV1().VolumeSnapshots(benchNamespace).Get(ctx, name, getOpts)
		return err == nil && got.Status != nil && ptr.Deref(got.Status.ReadyToUse, false), err
	})
	return time.Since(start), err
}

// vmSnapshot takes VM snapshot name of the VM and returns created →
// Succeeded and readyToUse.
func (e *env) vmSnapshot(ctx context.Context, name string) (time.Duration, error) {
	api := e.virt.SnapshotV1beta1().VirtualMachineSnapshots(benchNamespace)
	start := time.Now()
	_, err := api.Create(ctx, &snapshotv1.VirtualMachineSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: snapshotv1.VirtualMachineSnapshotSpec{Source: corev1.TypedLocalObjectReference{
			APIGroup: ptr.To("kubevirt.io"), Kind: "VirtualMachine", Name: snapshotVM}},
	}, metav1.CreateOptions{})
	if err != nil {
		return 0, fmt.Errorf("create VM snapshot %s: %w", name, err)
	}
	var last *snapshotv1.VirtualMachineSnapshotStatus
	err = poll(ctx, 2*time.Minute, 20*time.Millisecond, "VM snapshot "+name+" Succeeded", func() (bool, error) {
		got, err := api.Get(ctx, name, getOpts)
		if err != nil {
			return false, err
		}
		last = got.Status
		if last != nil && last.Phase == snapshotv1.Failed {
			return false, fmt.Errorf("VM snapshot %s failed: %+v", name, last.Error)
		}
		return last != nil && last.Phase == snapshotv1.Succeeded && ptr.Deref(last.ReadyToUse, false), nil
	})
	if err == nil && !slices.Contains(last.Indications, snapshotv1.IndicationGuestAgent) {
		err = fmt.Errorf("VM snapshot %s: indications %v, want GuestAgent (a frozen guest)", name, last.Indications)
	}
	return time.Since(start), err
}

// freezeWindow is the last FreezeRequested → Thawed of the VM's timeline
// on the node.
func (e *env) freezeWindow(ctx context.Context) (time.Duration, error) {
	evs, err := e.nodectl.Timeline(ctx, benchNamespace+"/"+snapshotVM)
	if err != nil {
		return 0, fmt.Errorf("timeline of VMI %s: %w", snapshotVM, err)
	}
	var frozen, thawed time.Time
	for _, ev := range evs {
		switch ev.Reason {
		case "FreezeRequested":
			frozen, thawed = ev.Time, time.Time{}
		case "Thawed":
			if !frozen.IsZero() {
				thawed = ev.Time
			}
		}
	}
	if frozen.IsZero() || thawed.IsZero() {
		return 0, fmt.Errorf("timeline of VMI %s: no freeze followed by a thaw", snapshotVM)
	}
	return thawed.Sub(frozen), nil
}

// vmRestore restores the stopped VM from snapshot and returns created →
// complete.
func (e *env) vmRestore(ctx context.Context, name, snapshot string) (time.Duration, error) {
	api := e.virt.SnapshotV1beta1().VirtualMachineRestores(benchNamespace)
	start := time.Now()
	_, err := api.Create(ctx, &snapshotv1.VirtualMachineRestore{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: snapshotv1.VirtualMachineRestoreSpec{VirtualMachineSnapshotName: snapshot,
			Target: corev1.TypedLocalObjectReference{APIGroup: ptr.To("kubevirt.io"), Kind: "VirtualMachine", Name: snapshotVM}},
	}, metav1.CreateOptions{})
	if err != nil {
		return 0, fmt.Errorf("create VM restore %s: %w", name, err)
	}
	err = poll(ctx, 2*time.Minute, 20*time.Millisecond, "VM restore "+name+" complete", func() (bool, error) {
		got, err := api.Get(ctx, name, getOpts)
		return err == nil && got.Status != nil && ptr.Deref(got.Status.Complete, false), err
	})
	return time.Since(start), err
}

// cleanSnapshots deletes what the scenario made: restores, snapshots
// (their contents and volume snapshots follow), the VM (the restored
// claims it owns follow), the bare volume snapshots and claims.
func (e *env) cleanSnapshots(ctx context.Context, cycles int) {
	del := func(what string, err error) {
		if err != nil && !apierrors.IsNotFound(err) {
			e.log.Warn("snapshot scenario cleanup", "what", what, "err", err)
		}
	}
	for i := range cycles {
		del("restore", e.virt.SnapshotV1beta1().VirtualMachineRestores(benchNamespace).Delete(ctx, fmt.Sprintf("restore-%d", i), metav1.DeleteOptions{}))
		del("snapshot", e.virt.SnapshotV1beta1().VirtualMachineSnapshots(benchNamespace).Delete(ctx, fmt.Sprintf("snap-%d", i), metav1.DeleteOptions{}))
		del("volume snapshot", e.csi.SnapshotV1().VolumeSnapshots(benchNamespace).Delete(ctx, fmt.Sprintf("floor-%d", i), metav1.DeleteOptions{}))
		del("claim", e.kube.CoreV1().PersistentVolumeClaims(benchNamespace).Delete(ctx, fmt.Sprintf("floor-claim-%d", i), metav1.DeleteOptions{}))
	}
	del("vm", e.virt.KubevirtV1().VirtualMachines(benchNamespace).Delete(ctx, snapshotVM, metav1.DeleteOptions{}))
	del("claim", e.kube.CoreV1().PersistentVolumeClaims(benchNamespace).Delete(ctx, snapshotVM, metav1.DeleteOptions{}))
	if err := poll(ctx, 3*time.Minute, time.Second, "VMI "+snapshotVM+" gone", func() (bool, error) {
		_, err := e.virt.KubevirtV1().VirtualMachineInstances(benchNamespace).Get(ctx, snapshotVM, getOpts)
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		e.log.Warn("snapshot scenario cleanup", "err", err)
	}
}
