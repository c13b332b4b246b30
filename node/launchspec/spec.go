package launchspec

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
)

// Version is the launch spec format version this package writes.
const Version = 1

// ErrInvalid is returned (wrapped) by Verify for a malformed spec.
var ErrInvalid = errors.New("invalid launch spec")

// Spec is the launch spec.
type Spec struct {
	Version int `json:"version"`
	// VMI identifies the VMI the spec was built for (logs, sanity checks).
	VMI VMIRef `json:"vmi"`
	// Args is QEMU's argv after the binary name. The launcher appends its
	// own private monitor (-chardev socket,fd=N + -mon) and nothing else.
	Args []string `json:"args"`
	// Disks are prepared, in order, before QEMU starts.
	Disks []DiskPrep `json:"disks,omitempty"`
	// Devices maps VMI disk and interface names to the QEMU ids used in
	// Args (for the agent: block stats, NIC status, hotplug).
	Devices []Device `json:"devices,omitempty"`
	// RTC, when set, is a guest clock base the launcher turns into a
	// trailing "-rtc base=<date>" when it starts QEMU.
	RTC *RTC `json:"rtc,omitempty"`
	// TPM, when set, makes the launcher start swtpm before QEMU.
	TPM *TPM `json:"tpm,omitempty"`
	// GracePeriodSeconds is how long the launcher waits after an ACPI
	// power-down on SIGTERM before it sends QMP quit.
	GracePeriodSeconds int64 `json:"gracePeriodSeconds"`
	// Hash is the content hash (see Seal).
	Hash string `json:"hash"`
}

// VMIRef names the VMI a spec belongs to.
type VMIRef struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
}

// DeviceKind is the kind of a VMI device in Spec.Devices.
type DeviceKind string

// Device kinds.
const (
	DeviceDisk      DeviceKind = "disk"
	DeviceInterface DeviceKind = "interface"
)

// Device maps one VMI device to its QEMU ids.
type Device struct {
	Kind DeviceKind `json:"kind"`
	Name string     `json:"name"` // the VMI's disk or interface name
	ID   string     `json:"id"`   // QEMU device id (-device id=)
	// Node is the block node name of a disk's format layer, or the netdev
	// id of an interface.
	Node string `json:"node,omitempty"`
}

// DiskKind says how the launcher prepares a disk.
type DiskKind string

// Disk preparation kinds.
const (
	// ContainerDisk: a qcow2 overlay at Target backed by the disk file in
	// the holder container's root (/proc/<pid>/root/<SourcePath>).
	ContainerDisk DiskKind = "containerDisk"
	// EmptyDisk: a sparse image of SizeBytes at Target (kept if present).
	EmptyDisk DiskKind = "emptyDisk"
	// PVCFile: the raw disk.img at the root of a filesystem-mode PVC
	// (Target). An existing one is used as it is: never resized, truncated
	// or replaced. An absent one is created sparse with SizeBytes, unless
	// SizeBytes is 0 (capacity unknown, or the volume is read-only): then
	// it must exist.
	PVCFile DiskKind = "pvcFile"
	// PVCBlock: the device of a block-mode PVC (Target); nothing is
	// created, the launcher only checks that it is a block device it can
	// open, so a missing or unusable device fails naming the volume.
	PVCBlock DiskKind = "pvcBlock"
	// FirmwareVars: a copy of the firmware's variable store template
	// SourcePath (an absolute path in the launcher image) at Target, made
	// once per pod (kept if present, so a relaunch in the same pod keeps
	// the NVRAM). Volume is "efi-vars".
	FirmwareVars DiskKind = "firmwareVars"
)

// DiskPrep is one disk image the launcher creates before QEMU starts.
type DiskPrep struct {
	Volume string   `json:"volume"`
	Kind   DiskKind `json:"kind"`
	// Target is the image to create (inside the private directory).
	Target string `json:"target"`
	// Format of Target: "qcow2" for overlays, "raw" or "qcow2" for
	// emptyDisk.
	Format string `json:"format"`
	// HolderPIDFile (containerDisk in a pod of the Containers shape) holds
	// the pid of the container that holds the disk, as written by
	// `nodevirt-launcher hold-disk`.
	HolderPIDFile string `json:"holderPidFile,omitempty"`
	// ImageRoot (containerDisk in a pod of the ImageVolumes shape) is where
	// the image volume is mounted. Exactly one of HolderPIDFile and
	// ImageRoot is set.
	ImageRoot string `json:"imageRoot,omitempty"`
	// SourcePath (containerDisk) is the disk's path inside the image (the
	// holder's root or ImageRoot); empty = the only regular file under
	// /disk/. For FirmwareVars it is the template in the launcher image.
	SourcePath string `json:"sourcePath,omitempty"`
	// SizeBytes (emptyDisk, pvcFile) is the virtual size of an image
	// created by the launcher.
	SizeBytes int64 `json:"sizeBytes,omitempty"`
	// ReadOnly (pvcBlock) opens the device read-only for the check.
	ReadOnly bool `json:"readOnly,omitempty"`
}

// Seal sets s.Version (if zero) and s.Hash from s's content.
func (s *Spec) Seal() error {
	if s.Version == 0 {
		s.Version = Version
	}
	h, err := s.ContentHash()
	if err != nil {
		return err
	}
	s.Hash = h
	return nil
}

// ContentHash returns the hex SHA-256 of s encoded as JSON with Hash empty.
func (s Spec) ContentHash() (string, error) {
	s.Hash = ""
	b, err := json.Marshal(s)
	if err != nil {
		return "", fmt.Errorf("encode launch spec for %s/%s: %w", s.VMI.Namespace, s.VMI.Name, err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// Verify checks that s is well formed and its hash matches its content.
func (s Spec) Verify() error {
	if s.Version != Version {
		return fmt.Errorf("%w: version %d, want %d", ErrInvalid, s.Version, Version)
	}
	if len(s.Args) == 0 {
		return fmt.Errorf("%w: no QEMU arguments", ErrInvalid)
	}
	if s.GracePeriodSeconds < 0 {
		return fmt.Errorf("%w: negative grace period", ErrInvalid)
	}
	if s.RTC != nil {
		if err := s.RTC.Validate(); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalid, err)
		}
	}
	if s.TPM != nil {
		if err := s.TPM.Validate(); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalid, err)
		}
	}
	for i, d := range s.Disks {
		if err := d.verify(); err != nil {
			return fmt.Errorf("%w: disk %d (%q): %w", ErrInvalid, i, d.Volume, err)
		}
	}
	h, err := s.ContentHash()
	if err != nil {
		return err
	}
	if h != s.Hash {
		return fmt.Errorf("%w: hash %q does not match content (%q)", ErrInvalid, s.Hash, h)
	}
	return nil
}

func (d DiskPrep) verify() error {
	if !filepath.IsAbs(d.Target) || filepath.Clean(d.Target) != d.Target {
		return fmt.Errorf("target %q is not a clean absolute path", d.Target)
	}
	switch d.Kind {
	case ContainerDisk:
		if d.Format != "qcow2" {
			return fmt.Errorf("overlay format %q, want qcow2", d.Format)
		}
		if (d.HolderPIDFile == "") == (d.ImageRoot == "") {
			return fmt.Errorf("want exactly one of holder pid file %q and image root %q", d.HolderPIDFile, d.ImageRoot)
		}
		for _, p := range []string{d.HolderPIDFile, d.ImageRoot} {
			if p != "" && !filepath.IsAbs(p) {
				return fmt.Errorf("%q is not absolute", p)
			}
		}
	case EmptyDisk:
		if d.Format != "raw" && d.Format != "qcow2" {
			return fmt.Errorf("format %q, want raw or qcow2", d.Format)
		}
		if d.SizeBytes <= 0 {
			return fmt.Errorf("size %d is not positive", d.SizeBytes)
		}
	case PVCFile:
		if d.Format != "raw" {
			return fmt.Errorf("format %q, want raw", d.Format)
		}
		if d.SizeBytes < 0 {
			return fmt.Errorf("size %d is negative", d.SizeBytes)
		}
		if filepath.Base(d.Target) != PVCImageName {
			return fmt.Errorf("target %q is not a %s", d.Target, PVCImageName)
		}
	case PVCBlock:
		if d.SizeBytes != 0 {
			return fmt.Errorf("a block device has no size to create (%d)", d.SizeBytes)
		}
	case FirmwareVars:
		if d.Format != "raw" {
			return fmt.Errorf("format %q, want raw", d.Format)
		}
		if !filepath.IsAbs(d.SourcePath) || filepath.Clean(d.SourcePath) != d.SourcePath {
			return fmt.Errorf("template %q is not a clean absolute path", d.SourcePath)
		}
	default:
		return fmt.Errorf("unknown kind %q", d.Kind)
	}
	return nil
}
