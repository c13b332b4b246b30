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
//     plus "-incoming defer" and -S (the guest arrives paused; the agent
//     resumes it once the source completed); the socket is named later
//     by QMP migrate-incoming, so no path reaches the command line.
//   - Accelerator: -accel kvm (-cpu host or the requested model) when the
//     node's KVM is usable; otherwise, if the cluster allows emulation,
//     -accel tcg,tb-size=64 (a 64 MiB translation cache instead of QEMU's
//     default of up to 1 GiB: the launcher pod's memory request stays
//     small) with -cpu max; otherwise ErrNoAccelerator naming the reason.
//   - Graphics: unless autoattachGraphicsDevice is false, a "VGA" device
//     (KubeVirt's amd64 BIOS default, model vga; OVMF drives it too, so
//     EFI guests keep it rather than KubeVirt's bochs) and -vnc on
//     sockets/vnc.sock, for the vnc and vnc/screenshot subresources.
//
// # Domain fields (KubeVirt spelling → QEMU)
//
//   - firmware.uuid → -uuid (SMBIOS type 1 UUID); unset = metadata.uid.
//     firmware.serial → -smbios type=1,serial= (comma-escaped, printable
//     ASCII only).
//   - firmware.bootloader.bios.useSerial → -machine graphics=off, which
//     makes SeaBIOS print on the serial port. bios is the default.
//   - firmware.bootloader.efi → OVMF from Debian's ovmf package in the
//     launcher image: code (OVMF_CODE_4M.fd, read-only) as pflash0, and
//     a per-VM copy of the VARS template as pflash1 in the private
//     directory (DiskPrep kind firmwareVars, made by the launcher; the
//     shared template is never opened by QEMU). secureBoot (default true,
//     as KubeVirt) uses OVMF_CODE_4M.secboot.fd with OVMF_VARS_4M.ms.fd
//     (Microsoft keys enrolled) and -global cfi.pflash01.secure=on; it
//     requires features.smm (refused at admission otherwise, as
//     KubeVirt). efi.persistent: true (NVRAM across VMI restarts) is
//     refused; the NVRAM lives as long as the pod. With kernelBoot, OVMF
//     loads -kernel through fw_cfg without checking it against db (the
//     launcher test boots the Debian-signed kernel with secure boot
//     reported enabled): kernelBoot under secure boot is not verified.
//   - features.acpi (default on) → nothing; enabled: false → -machine
//     acpi=off. features.smm → -machine smm=on|off. features.apic →
//     nothing (the APIC is part of q35/pc; enabled: false is accepted and
//     has no effect), endOfInterrupt → kvm-pv-eoi=on (KVM only).
//   - features.pvspinlock → kvm-pv-unhalt=on|off, features.kvm.hidden →
//     kvm=off, clock.timer.kvm.present: false → kvmclock=off: KVM only.
//   - features.hyperv → hv-relaxed, hv-vapic, hv-spinlocks=0x<n>,
//     hv-vpindex, hv-runtime, hv-synic, hv-stimer (+ hv-time, which QEMU
//     requires; direct → hv-stimer-direct), hv-reset, hv-frequencies,
//     hv-reenlightenment, hv-tlbflush, hv-ipi, hv-evmcs,
//     hv-vendor-id=<id>; clock.timer.hyperv → hv-time. Under KVM only:
//     QEMU 7.2 implements the Hyper-V CPUID leaves and MSRs in its KVM
//     code alone, so under TCG every Hyper-V field is accepted and
//     emitted as nothing (QEMU would start, but the guest would not see
//     them). The dependencies QEMU enforces (synic→vpindex,
//     synictimer→synic, tlbflush/ipi→vpindex, evmcs→vapic) are refused
//     at admission and again here.
//   - clock: no clock = QEMU's default, base=utc. utc: {} → -rtc
//     base=utc. utc.offsetSeconds and timezone depend on the start time,
//     so the spec carries them in Spec.RTC and the launcher appends
//     "-rtc base=<date>" when it starts QEMU (QEMU merges -rtc options).
//     Zone names are checked against the tz database embedded in the
//     binaries (time/tzdata), and by a CRD pattern at admission.
//     timer.rtc.tickPolicy catchup → driftfix=slew (delay = QEMU's
//     default); track guest|wall → clock=vm|host. timer.pit.tickPolicy →
//     -global kvm-pit.lost_tick_policy=delay|discard under KVM (catchup
//     maps to delay: kvm-pit re-injects missed ticks); QEMU's own PIT
//     under TCG has no policy, so nothing is emitted. timer.hpet.present:
//     false → -machine hpet=off; hpet.tickPolicy has no QEMU equivalent
//     and is accepted without effect. pit.present: false is accepted
//     without effect (q35 and pc always have a PIT).
//   - devices.rng → -object rng-random on /dev/urandom + virtio-rng-pci.
//   - devices.inputs tablet: bus usb (default) → usb-tablet on the
//     qemu-xhci controller (added once), virtio → virtio-tablet-pci.
//   - devices.watchdog.i6300esb → -device i6300esb and -watchdog-action
//     (default reset; shutdown = ACPI power-down request).
//   - devices.tpm → Spec.TPM (the launcher starts swtpm, state and control
//     socket in the pod's private directory) and -chardev/-tpmdev
//     emulator/-device tpm-tis; persistent: true is refused.
//   - devices.blockMultiQueue → num-queues = vCPUs on every virtio-blk
//     disk (unset leaves QEMU's default, which on 7.2 is also one queue
//     per vCPU). devices.networkInterfaceMultiqueue is accepted without
//     effect: netsetup creates single-queue taps (see netsetup's doc).
//   - disks[].io native|threads → the file node's aio (native needs cache
//     none, refused otherwise); dedicatedIOThread → an iothread object
//     per disk (virtio only).
//   - No -no-shutdown: a guest power-off ends QEMU (exit 0) right after the
//     SHUTDOWN event, so the pod completes; the agent sees the event on
//     qmp.sock and the launcher records the outcome (package launcher).
//     Guest reboots stay reboots (no -no-reboot).
//   - Disk cache: cache "none" = O_DIRECT (cache.direct) with the device
//     write cache on, "writethrough" = host page cache with the device
//     write cache off, "writeback" and unset = QEMU's default (host page
//     cache, write cache on); unset is not "none" because O_DIRECT fails on
//     tmpfs-backed emptyDirs. Unset is "none" on a ReadWriteMany PVC
//     (status.volumeStatus): a migration's target opens the same data
//     while the source runs, so no host page cache may sit between them.
//   - Buses: virtio -> virtio-blk-pci; sata -> ide-hd/ide-cd on the q35
//     AHCI (ide.0 … ide.5); scsi -> scsi-hd/scsi-cd on one virtio-scsi-pci;
//     usb -> usb-storage on one qemu-xhci. cdrom defaults to sata and
//     read-only, disk and lun to virtio.
//   - emptyDisk images are sparse raw files; containerDisks run from a
//     qcow2 overlay; PVCs are raw (file disk.img, or the block device);
//     a filesystem-mode PVC's disk.img, when the launcher creates it, is
//     its capacity (Input.PVCCapacities) less FilesystemOverhead.
package convert
