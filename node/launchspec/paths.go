package launchspec

import (
	"fmt"
	"path/filepath"
	"strings"
)

// Default mount points inside the launcher pod (docs/launcher-pod.md).
const (
	DefaultSocketsDir = "/var/run/nodevirt/sockets"
	DefaultPrivateDir = "/var/run/nodevirt/private"
	DefaultPVCDir     = "/var/run/nodevirt/pvcs"
	DefaultSecretsDir = "/var/run/nodevirt/secrets"
	DefaultBlockDir   = "/dev/nodevirt"
	DefaultBinDir     = "/var/run/nodevirt/bin"
	DefaultImagesDir  = "/var/run/nodevirt/images"
)

// File names in the sockets directory.
const (
	LauncherSocket = "launcher.sock"
	QMPSocket      = "qmp.sock"
	QGASocket      = "qga.sock"
	SerialSocket   = "serial.sock"
	SerialLog      = "serial.log" // everything the guest wrote to its serial console
	VNCSocket      = "vnc.sock"
	ExitFile       = "qemu-exit.json"
	// RunningFile is written (a Status) when QEMU runs, so that the agent
	// learns it from a file event instead of polling the launcher.
	RunningFile = "qemu-running.json"
)

// Paths are the directories of a launcher pod. Inside the pod they are the
// Default* mount points; the agent uses the same layout with the host's view
// of the emptyDirs (<kubeletRoot>/pods/<uid>/volumes/kubernetes.io~empty-dir/…)
// to reach sockets and write private files, and tests use temp dirs.
type Paths struct {
	Sockets string // emptyDir "sockets"
	Private string // emptyDir "private"
	PVCs    string // filesystem-mode PVC mounts: <PVCs>/<volume>/disk.img
	Secrets string // secret volumes: <Secrets>/<volume>/<key>
	Block   string // block-mode PVC devices: <Block>/<volume>
	// Images holds the image volumes of a pod of the ImageVolumes shape:
	// <Images>/disks/<volume>, <Images>/kernel-boot.
	Images string
}

// DefaultPaths is the layout inside a launcher pod.
func DefaultPaths() Paths {
	return Paths{
		Sockets: DefaultSocketsDir,
		Private: DefaultPrivateDir,
		PVCs:    DefaultPVCDir,
		Secrets: DefaultSecretsDir,
		Block:   DefaultBlockDir,
		Images:  DefaultImagesDir,
	}
}

// Socket returns the path of a file in the sockets directory (one of the
// *Socket constants, ExitFile or RunningFile).
func (p Paths) Socket(name string) string { return filepath.Join(p.Sockets, name) }

// HolderPIDFile is where the containerDisk holder of volume writes its pid.
func (p Paths) HolderPIDFile(volume string) string {
	return filepath.Join(p.Sockets, "disks", volume+".pid")
}

// LauncherDoneName is the file the launcher writes next to the holders'
// pid files when it ends: the containerDisk holders exit then, so the pod
// completes (after a guest shutdown, or on the source of a migration)
// instead of running on with nothing to hold a disk for.
const LauncherDoneName = "launcher.done"

// LauncherDone is the launcher's end marker (LauncherDoneName).
func (p Paths) LauncherDone() string { return filepath.Join(p.Sockets, "disks", LauncherDoneName) }

// Kernel and Initrd are the kernelBoot files copied by the kernel-boot init
// container.
func (p Paths) Kernel() string { return filepath.Join(p.Private, "kernel", "kernel") }

// Initrd: see Kernel.
func (p Paths) Initrd() string { return filepath.Join(p.Private, "kernel", "initrd") }

// ImageVolume is where the image volume of containerDisk volume is
// mounted (ImageVolumes shape).
func (p Paths) ImageVolume(volume string) string { return filepath.Join(p.Images, "disks", volume) }

// KernelBootImage is where the kernelBoot image volume is mounted
// (ImageVolumes shape).
func (p Paths) KernelBootImage() string { return filepath.Join(p.Images, "kernel-boot") }

// Overlay is the qcow2 overlay of a containerDisk volume.
func (p Paths) Overlay(volume string) string {
	return filepath.Join(p.Private, "overlays", volume+".qcow2")
}

// EmptyDisk is the image of an emptyDisk volume.
func (p Paths) EmptyDisk(volume string) string {
	return filepath.Join(p.Private, "empty", volume+".img")
}

// CloudInitISO is the NoCloud ISO of a cloudInitNoCloud volume (written by
// the agent).
func (p Paths) CloudInitISO(volume string) string {
	return filepath.Join(p.Private, "cloudinit", volume+".iso")
}

// PVCImageName is the disk image's name at the root of a filesystem-mode
// PVC (KubeVirt's).
const PVCImageName = "disk.img"

// EFIVars is the VM's own copy of the OVMF variable store (EFI NVRAM),
// copied from the firmware's template before QEMU starts.
func (p Paths) EFIVars() string { return filepath.Join(p.Private, "efi", "OVMF_VARS.fd") }

// TPMState is the directory of the vTPM's state (swtpm's --tpmstate): in
// the pod's private directory, so it lives as long as the pod.
func (p Paths) TPMState() string { return filepath.Join(p.Private, "tpm", "state") }

// TPMSocket is swtpm's control socket, which QEMU's tpm-emulator backend
// connects to.
func (p Paths) TPMSocket() string { return filepath.Join(p.Private, "tpm", "swtpm.sock") }

// PVCFile is the disk image of a filesystem-mode PVC volume.
func (p Paths) PVCFile(volume string) string {
	return filepath.Join(p.PVCs, volume, PVCImageName)
}

// PVCBlock is the device of a block-mode PVC volume.
func (p Paths) PVCBlock(volume string) string { return filepath.Join(p.Block, volume) }

// CheckVolumeName returns an error if name cannot be used in a path: it must
// be a non-empty single path element without NUL.
func CheckVolumeName(name string) error {
	if name == "" || name == "." || name == ".." || len(name) > 253 ||
		strings.ContainsAny(name, "/\x00") {
		return fmt.Errorf("volume name %q cannot be used as a file name", name)
	}
	return nil
}

// Validate checks that Sockets and Private are set and that every set
// directory is a clean absolute path.
func (p Paths) Validate() error {
	if p.Sockets == "" || p.Private == "" {
		return fmt.Errorf("pod paths: sockets and private directories are required")
	}
	for _, d := range []string{p.Sockets, p.Private, p.PVCs, p.Secrets, p.Block, p.Images} {
		if d != "" && (!filepath.IsAbs(d) || filepath.Clean(d) != d) {
			return fmt.Errorf("pod path %q is not a clean absolute path", d)
		}
	}
	return nil
}
