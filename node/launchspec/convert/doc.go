// Package convert turns a VMI into a launch spec: the pure function Build
// from (VMI, node facts, per-interface network results, pod paths) to a
// sealed launchspec.Spec. It also holds the KVM usability detector
// (DetectKVM) that produces the node fact Build needs.
//
// Input.Paths is the pod's view (launchspec.DefaultPaths() in a real pod):
// QEMU opens those paths. The agent writes files into the pod (the NoCloud
// ISO) through the same layout rooted at the host's view of the emptyDirs.
// Ids in the argv are generated (disk<i>, net<i>); Spec.Devices maps them
// back to the VMI's disk and interface names.
//
// Invariants:
//   - Build is pure: no file, clock or network access; the same Input gives
//     the same Spec (and hash). Errors wrap ErrUnsupported or ErrInvalid and
//     name the field.
//   - No user string reaches QEMU unescaped. Devices, block nodes and
//     netdevs use QEMU's JSON syntax (-device, -blockdev and -netdev accept
//     JSON in QEMU 7.2), every other option value built from a string is
//     comma-escaped (",," for ","), -append is a single argv element that
//     QEMU does not parse, and ids are generated (disk0, net0), never taken
//     from the VMI. FuzzBuild checks this.
//
// # Choices
//
//   - Migration target (Input.Incoming): the same argv as the source's
//     with "-incoming defer" instead of -S; the socket is named later by
//     QMP migrate-incoming, so no path reaches the command line.
//   - Accelerator: -accel kvm (-cpu host or the requested model) when the
//     node's KVM is usable; otherwise, if the cluster allows emulation,
//     -accel tcg,tb-size=64 (a 64 MiB translation cache instead of QEMU's
//     default of up to 1 GiB: the launcher pod's memory request stays
//     small) with -cpu max; otherwise ErrNoAccelerator naming the reason.
//   - Graphics: unless autoattachGraphicsDevice is false, a "VGA" device
//     (KubeVirt's amd64 BIOS default, model vga; KubeVirt picks bochs only
//     for EFI, which nodevirt does not boot) and -vnc on sockets/vnc.sock,
//     for the vnc and vnc/screenshot subresources.
//   - No -no-shutdown: a guest power-off ends QEMU (exit 0) right after the
//     SHUTDOWN event, so the pod completes; the agent sees the event on
//     qmp.sock and the launcher records the outcome (package launcher).
//     Guest reboots stay reboots (no -no-reboot).
//   - Disk cache: cache "none" = O_DIRECT (cache.direct) with the device
//     write cache on, "writethrough" = host page cache with the device
//     write cache off, "writeback" and unset = QEMU's default (host page
//     cache, write cache on); unset is not "none" because O_DIRECT fails on
//     tmpfs-backed emptyDirs.
//   - Buses: virtio -> virtio-blk-pci; sata -> ide-hd/ide-cd on the q35
//     AHCI (ide.0 … ide.5); scsi -> scsi-hd/scsi-cd on one virtio-scsi-pci;
//     usb -> usb-storage on one qemu-xhci. cdrom defaults to sata and
//     read-only, disk and lun to virtio.
//   - emptyDisk images are sparse raw files; containerDisks run from a
//     qcow2 overlay; PVCs are raw (file disk.img, or the block device);
//     a filesystem-mode PVC's disk.img, when the launcher creates it, is
//     its capacity (Input.PVCCapacities) less FilesystemOverhead.
package convert
