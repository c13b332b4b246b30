package convert

import (
	"fmt"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/node/launchspec"
)

// q35AHCIPorts is the number of ports of q35's built-in AHCI controller.
const q35AHCIPorts = 6

// diskSource is where a volume's image is and how QEMU opens it.
type diskSource struct {
	path     string
	driver   string // file layer: "file" or "host_device"
	format   string // "raw" or "qcow2"
	readOnly bool   // the volume itself is read-only
	// generated: the image is regenerated for every launch (cloud-init),
	// so it may be opened writable where a device requires it.
	generated bool
	// shared: the data is on storage other nodes open too (a ReadWriteMany
	// PVC), so the disk's cache defaults to none.
	shared bool
}

func (b *builder) disks() error {
	vols := map[string]v1.Volume{}
	for _, v := range b.vmi.Spec.Volumes {
		vols[v.Name] = v
	}
	used := map[string]bool{}
	for i, d := range b.vmi.Spec.Domain.Devices.Disks {
		field := fmt.Sprintf("spec.domain.devices.disks[%d]", i)
		vol, ok := vols[d.Name]
		if !ok {
			return fmt.Errorf("%w: %s: no volume named %q", ErrInvalid, field, d.Name)
		}
		if used[d.Name] {
			return fmt.Errorf("%w: %s: volume %q used by two disks", ErrInvalid, field, d.Name)
		}
		used[d.Name] = true
		if err := launchspec.CheckVolumeName(d.Name); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrInvalid, field, err)
		}
		src, err := b.source(vol)
		if err != nil {
			return fmt.Errorf("%s: volume %q: %w", field, d.Name, err)
		}
		if err := b.disk(i, d, src); err != nil {
			return fmt.Errorf("%s: %w", field, err)
		}
	}
	return nil
}

// source resolves a volume to its image and queues disk preparation.
func (b *builder) source(v v1.Volume) (diskSource, error) {
	p := b.in.Paths
	switch {
	case v.ContainerDisk != nil:
		prep := launchspec.DiskPrep{
			Volume: v.Name, Kind: launchspec.ContainerDisk, Target: p.Overlay(v.Name), Format: "qcow2",
			SourcePath: v.ContainerDisk.Path,
		}
		if b.in.ImageVolumes {
			prep.ImageRoot = p.ImageVolume(v.Name)
		} else {
			prep.HolderPIDFile = p.HolderPIDFile(v.Name)
		}
		b.prep = append(b.prep, prep)
		return diskSource{path: p.Overlay(v.Name), driver: "file", format: "qcow2"}, nil
	case v.EmptyDisk != nil:
		size := v.EmptyDisk.Capacity.Value()
		if size <= 0 {
			return diskSource{}, fmt.Errorf("%w: emptyDisk.capacity must be positive", ErrInvalid)
		}
		b.prep = append(b.prep, launchspec.DiskPrep{
			Volume: v.Name, Kind: launchspec.EmptyDisk, Target: p.EmptyDisk(v.Name), Format: "raw", SizeBytes: size,
		})
		return diskSource{path: p.EmptyDisk(v.Name), driver: "file", format: "raw"}, nil
	case v.CloudInitNoCloud != nil:
		return diskSource{path: p.CloudInitISO(v.Name), driver: "file", format: "raw", readOnly: true, generated: true}, nil
	case v.PersistentVolumeClaim != nil:
		return b.pvcSource(v.Name, v.PersistentVolumeClaim.ReadOnly), nil
	default:
		return diskSource{}, fmt.Errorf("%w: volume has no supported source", ErrUnsupported)
	}
}

// target is a disk's normalised device choice.
type target struct {
	cdrom    bool
	bus      v1.DiskBus
	readOnly bool
}

func diskTarget(d v1.Disk) (target, error) {
	var t target
	set := 0
	if d.Disk != nil {
		set++
		t = target{bus: d.Disk.Bus, readOnly: d.Disk.ReadOnly}
	}
	if d.LUN != nil {
		set++
		t = target{bus: d.LUN.Bus, readOnly: d.LUN.ReadOnly}
	}
	if d.CDRom != nil {
		set++
		t = target{cdrom: true, bus: d.CDRom.Bus, readOnly: d.CDRom.ReadOnly == nil || *d.CDRom.ReadOnly}
		if t.bus == "" {
			t.bus = v1.DiskBusSATA
		}
	}
	if set > 1 {
		return target{}, fmt.Errorf("%w: more than one of disk, cdrom, lun", ErrInvalid)
	}
	if t.bus == "" {
		t.bus = v1.DiskBusVirtio
	}
	return t, nil
}

// disk adds the block nodes and the device of disk number i.
func (b *builder) disk(i int, d v1.Disk, src diskSource) error {
	t, err := diskTarget(d)
	if err != nil {
		return err
	}
	ro := t.readOnly || src.readOnly
	if ro && t.bus == v1.DiskBusSATA && !t.cdrom {
		// ide-hd refuses read-only block nodes.
		if t.readOnly || !src.generated {
			return fmt.Errorf("%w: a read-only disk on bus sata (use virtio or scsi, or a cdrom)", ErrUnsupported)
		}
		ro = false
	}
	id := fmt.Sprintf("disk%d", i)
	fileNode, fmtNode := id+"-file", id+"-format"
	file := map[string]any{"driver": src.driver, "filename": src.path, "node-name": fileNode, "read-only": ro}
	format := map[string]any{"driver": src.format, "file": fileNode, "node-name": fmtNode, "read-only": ro}
	cache := d.Cache
	if cache == "" && src.shared {
		// A live migration's target opens the same data while the
		// source still runs: no host page cache may hold what the other
		// side has not seen (the source's dirty pages, or a block
		// device's stale ones on the target).
		cache = v1.CacheNone
	}
	writeCache := ""
	switch cache {
	case "", v1.CacheWriteBack:
	case v1.CacheNone:
		file["cache"] = map[string]any{"direct": true}
		format["cache"] = map[string]any{"direct": true}
		writeCache = "on"
	case v1.CacheWriteThrough:
		writeCache = "off"
	default:
		return fmt.Errorf("%w: cache %q", ErrUnsupported, d.Cache)
	}
	switch d.IO {
	case "", v1.IODefault:
	case v1.IOThreads:
		file["aio"] = "threads"
	case v1.IONative:
		if cache != v1.CacheNone {
			return fmt.Errorf("%w: io native needs cache none", ErrInvalid)
		}
		file["aio"] = "native"
	default:
		return fmt.Errorf("%w: io %q", ErrUnsupported, d.IO)
	}
	b.add("-blockdev", jsonArg(file), "-blockdev", jsonArg(format))

	dev := map[string]any{"drive": fmtNode, "id": id}
	if err := b.virtioBlkExtras(id, d, t, dev); err != nil {
		return err
	}
	if d.Serial != "" {
		dev["serial"] = d.Serial
	}
	if d.BootOrder != nil {
		if *d.BootOrder < 1 || *d.BootOrder > 1<<16 {
			return fmt.Errorf("%w: bootOrder %d out of range", ErrInvalid, *d.BootOrder)
		}
		dev["bootindex"] = *d.BootOrder
	}
	if err := b.busDevice(dev, t, writeCache); err != nil {
		return err
	}
	b.device(dev)
	b.devices = append(b.devices, launchspec.Device{Kind: launchspec.DeviceDisk, Name: d.Name, ID: id, Node: fmtNode})
	return nil
}

// busDevice fills in the driver and bus of dev, adding controllers.
func (b *builder) busDevice(dev map[string]any, t target, writeCache string) error {
	switch t.bus {
	case v1.DiskBusVirtio:
		if t.cdrom {
			return fmt.Errorf("%w: cdrom on bus virtio (use sata or scsi)", ErrUnsupported)
		}
		dev["driver"] = "virtio-blk-pci"
	case v1.DiskBusSATA:
		if b.machineType != "q35" && !hasPrefix(b.machineType, "pc-q35") {
			return fmt.Errorf("%w: bus sata needs machine type q35, not %q", ErrUnsupported, b.machineType)
		}
		if b.satePorts == q35AHCIPorts {
			return fmt.Errorf("%w: more than %d sata disks", ErrUnsupported, q35AHCIPorts)
		}
		dev["driver"] = pick(t.cdrom, "ide-cd", "ide-hd")
		dev["bus"] = fmt.Sprintf("ide.%d", b.satePorts)
		b.satePorts++
	case v1.DiskBusSCSI:
		if !b.scsi {
			b.scsi = true
			b.device(map[string]any{"driver": "virtio-scsi-pci", "id": "scsi0"})
		}
		dev["driver"] = pick(t.cdrom, "scsi-cd", "scsi-hd")
		dev["bus"] = "scsi0.0"
	case v1.DiskBusUSB:
		if t.cdrom {
			return fmt.Errorf("%w: cdrom on bus usb", ErrUnsupported)
		}
		b.addUSB()
		dev["driver"] = "usb-storage"
		dev["bus"] = "usb0.0"
		writeCache = "" // usb-storage has no write-cache property
	default:
		return fmt.Errorf("%w: bus %q", ErrUnsupported, t.bus)
	}
	if writeCache != "" {
		dev["write-cache"] = writeCache
	}
	return nil
}

// virtioBlkExtras adds a dedicated I/O thread and, with
// devices.blockMultiQueue, one queue per vCPU to a virtio-blk disk.
func (b *builder) virtioBlkExtras(id string, d v1.Disk, t target, dev map[string]any) error {
	virtio := t.bus == v1.DiskBusVirtio && !t.cdrom
	if d.DedicatedIOThread != nil && *d.DedicatedIOThread {
		if !virtio {
			return fmt.Errorf("%w: dedicatedIOThread needs bus virtio", ErrUnsupported)
		}
		thread := "iothread-" + id
		b.add("-object", jsonArg(map[string]any{"qom-type": "iothread", "id": thread}))
		dev["iothread"] = thread
	}
	if mq := b.vmi.Spec.Domain.Devices.BlockMultiQueue; mq != nil && *mq && virtio && b.vcpus > 1 {
		dev["num-queues"] = b.vcpus
	}
	return nil
}

func (b *builder) addUSB() {
	if !b.usb {
		b.usb = true
		b.device(map[string]any{"driver": "qemu-xhci", "id": "usb0"})
	}
}

func pick(c bool, yes, no string) string {
	if c {
		return yes
	}
	return no
}

func hasPrefix(s, p string) bool { return len(s) >= len(p) && s[:len(p)] == p }
