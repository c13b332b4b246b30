package v1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
)

// DomainSpec is the VM's virtual hardware.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.firmware) && has(self.firmware.bootloader) && has(self.firmware.bootloader.efi) && (!has(self.firmware.bootloader.efi.secureBoot) || self.firmware.bootloader.efi.secureBoot)) || (has(self.features) && has(self.features.smm) && (!has(self.features.smm.enabled) || self.features.smm.enabled))",fieldPath=".features.smm",message="EFI secure boot (firmware.bootloader.efi.secureBoot, default true) requires SMM: set features.smm: {} or efi.secureBoot: false",reason=FieldValueInvalid
type DomainSpec struct {
	// Resources are the launcher pod's requests and limits.
	// +optional
	Resources ResourceRequirements `json:"resources,omitempty"`
	// +optional
	CPU *CPU `json:"cpu,omitempty"`
	// +optional
	Memory *Memory `json:"memory,omitempty"`
	// +optional
	Machine *Machine `json:"machine,omitempty"`
	// +optional
	Firmware *Firmware `json:"firmware,omitempty"`
	// Features are platform features: ACPI, APIC, SMM, Hyper-V.
	// +optional
	Features *Features `json:"features,omitempty"`
	// Clock is the guest RTC's base and the guest's timers.
	// +optional
	Clock *Clock `json:"clock,omitempty"`
	// Devices are the VM's disks, NICs and auto-attached devices.
	Devices Devices `json:"devices"`
}

// ResourceRequirements are the compute resources of the launcher pod.
type ResourceRequirements struct {
	// Requests; requests.memory doubles as guest memory when
	// spec.domain.memory.guest is unset.
	// +optional
	Requests corev1.ResourceList `json:"requests,omitempty"`
	// +optional
	Limits corev1.ResourceList `json:"limits,omitempty"`
	// OvercommitGuestOverhead leaves nodevirt's per-VM overhead out of the
	// pod's memory request.
	// +optional
	OvercommitGuestOverhead bool `json:"overcommitGuestOverhead,omitempty"`
}

// CPU is the guest CPU topology and model. vCPUs = cores × sockets × threads.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.isolateEmulatorThread) && self.isolateEmulatorThread) || (has(self.dedicatedCpuPlacement) && self.dedicatedCpuPlacement)",fieldPath=".isolateEmulatorThread",message="isolateEmulatorThread requires dedicatedCpuPlacement",reason=FieldValueInvalid
type CPU struct {
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=512
	Cores uint32 `json:"cores,omitempty"`
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	Sockets uint32 `json:"sockets,omitempty"`
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=8
	Threads uint32 `json:"threads,omitempty"`
	// Model is a QEMU CPU model name, or host-model / host-passthrough.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][A-Za-z0-9._-]*$`
	Model string `json:"model,omitempty"`
	// DedicatedCPUPlacement gives every vCPU a host CPU of its own: the
	// launcher pod gets Guaranteed QoS with one whole CPU per vCPU (which
	// the kubelet's static CPU manager makes exclusive), it runs only on
	// nodes labelled cpumanager=true, and the agent pins each vCPU thread
	// to one of the pod's CPUs.
	// +optional
	DedicatedCPUPlacement bool `json:"dedicatedCpuPlacement,omitempty"`
	// IsolateEmulatorThread adds one more dedicated CPU, to which QEMU's
	// other threads (main loop, I/O) are pinned, away from the vCPUs.
	// Requires dedicatedCpuPlacement.
	// +optional
	IsolateEmulatorThread bool `json:"isolateEmulatorThread,omitempty"`
}

// Memory is the guest's memory.
// +kubebuilder:validation:XValidation:rule="!has(self.guest) || quantity(string(self.guest)).compareTo(quantity('1Mi')) >= 0",fieldPath=".guest",message="must be at least 1Mi",reason=FieldValueInvalid
type Memory struct {
	// Guest is the memory the guest sees.
	// +optional
	Guest *resource.Quantity `json:"guest,omitempty"`
}

// Machine is the emulated machine.
type Machine struct {
	// Type is a QEMU machine type; default q35.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[a-z0-9][a-z0-9._-]*$`
	Type string `json:"type,omitempty"`
}

// DefaultMachineType is used when spec.domain.machine.type is unset.
const DefaultMachineType = "q35"

// Firmware configures how the guest boots and identifies itself.
type Firmware struct {
	// UUID is the SMBIOS system UUID (/sys/class/dmi/id/product_uuid);
	// default the VMI's metadata.uid.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`
	UUID types.UID `json:"uuid,omitempty"`
	// Serial is the SMBIOS system serial number.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[\x20-\x7e]*$`
	Serial string `json:"serial,omitempty"`
	// Bootloader selects BIOS (default) or EFI.
	// +optional
	Bootloader *Bootloader `json:"bootloader,omitempty"`
	// KernelBoot boots a kernel and initrd taken from a container image.
	// +optional
	KernelBoot *KernelBoot `json:"kernelBoot,omitempty"`
}

// Bootloader is the guest firmware: BIOS (SeaBIOS, the default) or EFI (OVMF).
//
// +kubebuilder:validation:XValidation:rule="!(has(self.bios) && has(self.efi))",message="at most one of bios and efi may be set"
type Bootloader struct {
	// +optional
	BIOS *BIOS `json:"bios,omitempty"`
	// +optional
	EFI *EFI `json:"efi,omitempty"`
}

// BIOS boots through SeaBIOS.
type BIOS struct {
	// UseSerial sends the BIOS's output to the serial console.
	// +optional
	UseSerial *bool `json:"useSerial,omitempty"`
}

// EFI boots through OVMF.
//
// +kubebuilder:validation:XValidation:rule="!has(self.persistent) || !self.persistent",fieldPath=".persistent",message="persistent EFI NVRAM (kept across VMI restarts) is not supported by nodevirt: the NVRAM lives as long as the VMI",reason=FieldValueForbidden
type EFI struct {
	// SecureBoot uses the secure-boot OVMF build with Microsoft's keys
	// enrolled. Default true; requires features.smm.
	// +optional
	SecureBoot *bool `json:"secureBoot,omitempty"`
	// Persistent keeps the NVRAM across VMI restarts; only false is
	// supported (the NVRAM survives guest reboots, not a new VMI).
	// +optional
	Persistent *bool `json:"persistent,omitempty"`
}

// KernelBoot boots the guest from a kernel (and initrd) instead of a disk.
type KernelBoot struct {
	// KernelArgs is the kernel command line.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	KernelArgs string `json:"kernelArgs,omitempty"`
	// Container holds the kernel and initrd.
	// +optional
	Container *KernelBootContainer `json:"container,omitempty"`
}

// KernelBootContainer is an image holding a kernel and an optional initrd.
//
// +kubebuilder:validation:XValidation:rule="has(self.kernelPath) || has(self.initrdPath)",message="at least one of kernelPath or initrdPath must be set"
type KernelBootContainer struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Image string `json:"image"`
	// +optional
	// +kubebuilder:validation:MaxLength=253
	ImagePullSecret string `json:"imagePullSecret,omitempty"`
	// KernelPath is the kernel's absolute path inside the image.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^/[^\x00]*$`
	KernelPath string `json:"kernelPath,omitempty"`
	// InitrdPath is the initrd's absolute path inside the image.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^/[^\x00]*$`
	InitrdPath string `json:"initrdPath,omitempty"`
	// +optional
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`
}

// Devices are the VM's devices.
//
// +kubebuilder:validation:XValidation:rule="!has(self.disks) || self.disks.all(d, !has(d.bootOrder) || self.disks.exists_one(e, has(e.bootOrder) && e.bootOrder == d.bootOrder))",fieldPath=".disks",message="bootOrder must be unique: two disks have the same bootOrder",reason=FieldValueInvalid
type Devices struct {
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=256
	Disks []Disk `json:"disks,omitempty"`
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	Interfaces []Interface `json:"interfaces,omitempty"`
	// AutoattachPodInterface adds a default pod-network NIC when no interface
	// is given. Default true.
	// +optional
	AutoattachPodInterface *bool `json:"autoattachPodInterface,omitempty"`
	// AutoattachGraphicsDevice adds a VGA device and a VNC server. Default true.
	// +optional
	AutoattachGraphicsDevice *bool `json:"autoattachGraphicsDevice,omitempty"`
	// AutoattachSerialConsole adds a serial console. Default true.
	// +optional
	AutoattachSerialConsole *bool `json:"autoattachSerialConsole,omitempty"`
	// AutoattachMemBalloon adds a virtio balloon. Default true.
	// +optional
	AutoattachMemBalloon *bool `json:"autoattachMemBalloon,omitempty"`
	// Rng adds a virtio RNG fed from the host's /dev/urandom.
	// +optional
	Rng *Rng `json:"rng,omitempty"`
	// Inputs are input devices (tablets).
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=4
	Inputs []Input `json:"inputs,omitempty"`
	// Watchdog is a hardware watchdog.
	// +optional
	Watchdog *Watchdog `json:"watchdog,omitempty"`
	// BlockMultiQueue gives every virtio-blk disk one queue per vCPU.
	// +optional
	BlockMultiQueue *bool `json:"blockMultiQueue,omitempty"`
	// NetworkInterfaceMultiQueue gives virtio NICs one queue pair per vCPU
	// where the binding allows it.
	// +optional
	NetworkInterfaceMultiQueue *bool `json:"networkInterfaceMultiqueue,omitempty"`
	// TPM is a virtual TPM 2.0 (swtpm beside QEMU, state for the VMI's
	// life).
	// +optional
	TPM *TPMDevice `json:"tpm,omitempty"`
}
