// Package snapshot is the VirtualMachineSnapshot controller
// (snapshot.kubevirt.io/v1beta1): it captures a VM's spec and a CSI
// VolumeSnapshot of each of its PVC volumes in a
// VirtualMachineSnapshotContent, freezing a running guest's filesystems
// through its guest agent only while the volume snapshots are cut.
//
// # Model
//
// Sync reads the snapshot, its content (informer caches), the VM, VMI and
// claims (shared informers) and the CSI objects (read on demand through
// [CSI]: the snapshot.storage.k8s.io API may be installed after the
// controller starts, or not at all), and moves the snapshot on:
//
//  1. Finalizer snapshot.kubevirt.io/vmsnapshot-protection, phase
//     InProgress; the VM's status.snapshotInProgress names the snapshot
//     (vmlock.go: one snapshot at a time, and a stopped VM does not start
//     meanwhile) until it ends.
//  2. Content vmsnapshot-content-<snapshot uid>, made once from the VM as
//     it is: metadata, spec, status, and a volume backup (the claim, and
//     the name of its VolumeSnapshot) per PVC volume whose claim's
//     StorageClass driver has a VolumeSnapshotClass (the default one, else
//     the first by name). Other volumes are excluded and named in
//     status.snapshotVolumes (containerDisks, emptyDisks, cloud-init, and
//     claims nothing can snapshot, with an event saying why). The content
//     is owned by the snapshot unless deletionPolicy is Retain.
//     Indications: Online when the VMI runs, NoGuestAgent when its
//     AgentConnected condition is not True.
//  3. Online with a guest agent: freeze the guest (PUT freeze on the
//     subresources.kubevirt.io API, as `virtctl freeze`, with the time
//     left to the failure deadline as unfreezeTimeout: the node thaws the
//     guest by then whatever becomes of this controller), indication
//     GuestAgent; a failed freeze gives QuiesceFailed and the snapshot
//     goes on crash-consistent.
//  4. Create the VolumeSnapshots (owned by the content).
//  5. Once every one has a creationTime (it is cut): unfreeze, and
//     status.creationTime is the latest of them.
//  6. Once every one is readyToUse: phase Succeeded, readyToUse, Ready.
//
// A VolumeSnapshot error, or the failure deadline (spec.failureDeadline,
// default 5 minutes, counted from the snapshot's creation) passing before
// the cut, thaws the guest and fails the snapshot with the reason. A
// deleted snapshot thaws a guest it froze before its finalizer goes; its
// content and volume snapshots follow by owner references (Retain keeps
// them). In progress, a snapshot is looked at again every 500 ms, every
// 25 ms while its guest is frozen (the freeze window is the cut's time
// plus at most that).
//
// # Status (written by this controller only, by update of the status subresource)
//
// Of VirtualMachineSnapshot: phase, readyToUse, sourceUID,
// virtualMachineSnapshotContentName, creationTime, error, conditions
// (Progressing, Ready, Failure), indications, snapshotVolumes. Of
// VirtualMachineSnapshotContent: creationTime, readyToUse, error,
// volumeSnapshotStatus.
//
// Of VirtualMachine: status.snapshotInProgress (set and cleared).
//
// # Restore (restore.go, restoreplan.go)
//
// The restore loop waits for a ready snapshot, holds an existing target
// (status.restoreInProgress) until it is stopped as the restore's
// targetReadinessPolicy says, creates a claim per volume backup from its
// VolumeSnapshot, then writes the target VM (or creates it), marked with
// the restore.kubevirt.io/lastRestoreUID annotation so that a round whose
// status write was lost recognises its own work. Of VirtualMachineRestore
// it writes status (restores, restoreTime, complete, conditions); of
// VirtualMachine, status.restoreInProgress (set and cleared).
package snapshot
