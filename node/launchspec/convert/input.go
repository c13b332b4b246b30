package convert

import (
	"errors"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/node/launchspec"
)

// Errors returned (wrapped) by Build.
var (
	// ErrInvalid: the VMI spec (or the Input) is inconsistent, e.g. a disk
	// names a missing volume.
	ErrInvalid = errors.New("invalid VMI for launch")
	// ErrUnsupported: the VMI asks for something nodevirt cannot run.
	ErrUnsupported = errors.New("unsupported VMI setting")
	// ErrNoAccelerator: KVM is unusable and emulation is not allowed.
	ErrNoAccelerator = errors.New("no usable accelerator")
)

// Input is everything Build needs.
type Input struct {
	VMI *v1.VirtualMachineInstance
	// Node is what the agent detected on its node.
	Node NodeFacts
	// AllowEmulation is the cluster configuration's permission to run
	// guests under TCG when KVM is unusable.
	AllowEmulation bool
	// Interfaces has one entry per VMI interface that gets a NIC, filled
	// from netsetup.Plan/Result (Tap, GuestMAC).
	Interfaces []NIC
	// Paths is the pod layout as seen by QEMU (launchspec.DefaultPaths()
	// in a real pod).
	Paths launchspec.Paths
	// BlockPVCs lists the PVC volumes in block mode (the rest are
	// filesystem mode).
	BlockPVCs map[string]bool
	// PVCCapacities are the capacities in bytes of the filesystem-mode PVC
	// volumes, by volume name (the agent reads them from the launcher pod,
	// where the controller recorded the claims'). A volume's disk.img, when
	// absent, is created with its capacity less FilesystemOverhead; a volume
	// missing here gets no disk.img created (it must exist).
	PVCCapacities map[string]int64
	// ImageVolumes: the pod has the ImageVolumes shape, its containerDisk
	// and kernelBoot images are mounted at Paths.ImageVolume and
	// Paths.KernelBootImage (no holder containers, no copied kernel).
	ImageVolumes bool
	// StartPaused starts QEMU with -S even without startStrategy Paused
	// (e.g. the agent wants to start stopped).
	StartPaused bool
	// Incoming starts QEMU as a live migration's target: "-incoming defer"
	// (the agent names the socket with QMP migrate-incoming, so no path or
	// user string reaches the command line) and -S: the guest arrives
	// paused even when it ran on the source, and runs only when the target
	// agent resumes it, once the source reported the migration completed
	// (without -S QEMU would resume it on arrival, before the source knows
	// whether the switch-over succeeded).
	Incoming bool
}

// NIC is the network result for one VMI interface.
type NIC struct {
	Name string // spec.domain.devices.interfaces[].name
	Tap  string // tap device in the pod netns (netsetup.Result.Tap)
	MAC  string // guest MAC (netsetup.Result.GuestMAC.String())
}

// NodeFacts are facts about the node the VMI runs on.
type NodeFacts struct {
	KVM KVM
}
