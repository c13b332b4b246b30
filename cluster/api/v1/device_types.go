package v1

// Disk attaches the volume of the same name to the guest.
//
// +kubebuilder:validation:XValidation:rule="!has(self.dedicatedIOThread) || !self.dedicatedIOThread || (!has(self.cdrom) && !has(self.lun) && (!has(self.disk) || !has(self.disk.bus) || self.disk.bus == 'virtio'))",fieldPath=".dedicatedIOThread",message="dedicatedIOThread needs bus virtio",reason=FieldValueInvalid
// +kubebuilder:validation:XValidation:rule="!has(self.io) || self.io != 'native' || (has(self.cache) && self.cache == 'none')",fieldPath=".io",message="io native needs cache none (O_DIRECT)",reason=FieldValueInvalid
// +kubebuilder:validation:XValidation:rule="(has(self.disk) ? 1 : 0) + (has(self.cdrom) ? 1 : 0) + (has(self.lun) ? 1 : 0) <= 1",message="at most one of disk, cdrom or lun may be set"
type Disk struct {
	// Name matches a volume in spec.volumes.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`
	// Disk attaches the volume as a disk; the default when no target is set.
	// +optional
	Disk *DiskTarget `json:"disk,omitempty"`
	// CDRom attaches the volume as a read-only CD-ROM.
	// +optional
	CDRom *CDRomTarget `json:"cdrom,omitempty"`
	// LUN attaches the volume as a SCSI LUN.
	// +optional
	LUN *LunTarget `json:"lun,omitempty"`
	// BootOrder is the boot priority; lower boots first. Unset disks are not
	// bootable when any disk sets it.
	// +optional
	// +kubebuilder:validation:Minimum=1
	BootOrder *uint `json:"bootOrder,omitempty"`
	// Serial is the disk's serial number as the guest sees it.
	// +optional
	// +kubebuilder:validation:MaxLength=20
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_.+-]+$`
	Serial string `json:"serial,omitempty"`
	// Cache is the host page cache mode.
	// +optional
	Cache DriverCache `json:"cache,omitempty"`
	// IO is QEMU's I/O mode: native (Linux AIO; needs cache none) or
	// threads (a thread pool, QEMU's default).
	// +optional
	IO DriverIO `json:"io,omitempty"`
	// DedicatedIOThread gives the disk its own QEMU I/O thread (virtio
	// disks only).
	// +optional
	DedicatedIOThread *bool `json:"dedicatedIOThread,omitempty"`
}

// DriverIO is a disk's I/O mode.
//
// +kubebuilder:validation:Enum=native;threads;default
type DriverIO string

// I/O modes; default is the same as unset.
const (
	IONative  DriverIO = "native"
	IOThreads DriverIO = "threads"
	IODefault DriverIO = "default"
)

// DiskBus is the bus a disk or CD-ROM hangs off.
//
// +kubebuilder:validation:Enum=virtio;sata;scsi;usb
type DiskBus string

// Disk buses.
const (
	DiskBusVirtio DiskBus = "virtio"
	DiskBusSATA   DiskBus = "sata"
	DiskBusSCSI   DiskBus = "scsi"
	DiskBusUSB    DiskBus = "usb"
)

// DriverCache is a disk cache mode.
//
// +kubebuilder:validation:Enum=none;writethrough;writeback
type DriverCache string

// Cache modes.
const (
	CacheNone         DriverCache = "none"
	CacheWriteThrough DriverCache = "writethrough"
	CacheWriteBack    DriverCache = "writeback"
)

// DiskTarget attaches a volume as a disk.
type DiskTarget struct {
	// Bus defaults to virtio.
	// +optional
	Bus DiskBus `json:"bus,omitempty"`
	// +optional
	ReadOnly bool `json:"readonly,omitempty"`
}

// CDRomTarget attaches a volume as a CD-ROM.
type CDRomTarget struct {
	// Bus defaults to sata.
	// +optional
	Bus DiskBus `json:"bus,omitempty"`
	// ReadOnly defaults to true.
	// +optional
	ReadOnly *bool `json:"readonly,omitempty"`
}

// LunTarget attaches a volume as a SCSI LUN.
type LunTarget struct {
	// Bus defaults to scsi.
	// +optional
	Bus DiskBus `json:"bus,omitempty"`
	// +optional
	ReadOnly bool `json:"readonly,omitempty"`
}

// Interface is a guest NIC connected to the network of the same name.
//
// +kubebuilder:validation:XValidation:rule="(has(self.masquerade) ? 1 : 0) + (has(self.bridge) ? 1 : 0) == 1",message="exactly one binding method (masquerade or bridge) must be set"
// +kubebuilder:validation:XValidation:rule="!has(self.ports) || has(self.masquerade)",fieldPath=".ports",message="ports may only be declared with the masquerade binding"
type Interface struct {
	// Name matches a network in spec.networks.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`
	// Model is the emulated NIC; default virtio.
	// +optional
	// +kubebuilder:validation:Enum=virtio;e1000;e1000e;igb;ne2k_pci;pcnet;rtl8139
	Model string `json:"model,omitempty"`
	// Masquerade NATs the guest behind the pod IP.
	// +optional
	Masquerade *InterfaceMasquerade `json:"masquerade,omitempty"`
	// Bridge hands the pod IP to the guest.
	// +optional
	Bridge *InterfaceBridge `json:"bridge,omitempty"`
	// MacAddress is the guest NIC's MAC, e.g. de:ad:00:00:be:af.
	// +optional
	// +kubebuilder:validation:Pattern=`^([0-9A-Fa-f]{2}[:-]){5}[0-9A-Fa-f]{2}$`
	MacAddress string `json:"macAddress,omitempty"`
	// Ports, when set, are the only ports forwarded to a masquerade guest.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	Ports []Port `json:"ports,omitempty"`
}

// InterfaceMasquerade selects the masquerade binding; it has no settings.
type InterfaceMasquerade struct{}

// InterfaceBridge selects the bridge binding; it has no settings.
type InterfaceBridge struct{}

// DefaultInterfaceModel is used when an interface leaves model unset.
const DefaultInterfaceModel = "virtio"

// Port is a port forwarded to the guest.
type Port struct {
	// +optional
	// +kubebuilder:validation:MaxLength=15
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name,omitempty"`
	// Protocol defaults to TCP.
	// +optional
	// +kubebuilder:validation:Enum=TCP;UDP
	Protocol string `json:"protocol,omitempty"`
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port"`
}
