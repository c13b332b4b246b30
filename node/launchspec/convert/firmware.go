package convert

import (
	"fmt"
	"regexp"

	"github.com/google/uuid"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/node/launchspec"
)

// OVMF images of Debian's ovmf package, as installed in the launcher image.
// The code images are opened read-only and shared; the VARS templates are
// only ever copied (into the VM's private directory) by the launcher.
const (
	OVMFCode        = "/usr/share/OVMF/OVMF_CODE_4M.fd"
	OVMFVars        = "/usr/share/OVMF/OVMF_VARS_4M.fd"
	OVMFSecbootCode = "/usr/share/OVMF/OVMF_CODE_4M.secboot.fd"
	// OVMFSecbootVars has Microsoft's keys enrolled and secure boot on.
	OVMFSecbootVars = "/usr/share/OVMF/OVMF_VARS_4M.ms.fd"
)

// Block node names of the EFI flash (-machine pflash0=, pflash1=).
const (
	efiCodeNode = "efi-code"
	efiVarsNode = "efi-vars"
)

func bootloader(fw *v1.Firmware) *v1.Bootloader {
	if fw == nil {
		return nil
	}
	return fw.Bootloader
}

func efiOf(fw *v1.Firmware) *v1.EFI {
	if bl := bootloader(fw); bl != nil {
		return bl.EFI
	}
	return nil
}

// secureBoot: EFI with secureBoot unset (KubeVirt's default) or true.
func secureBoot(efi *v1.EFI) bool {
	return efi != nil && (efi.SecureBoot == nil || *efi.SecureBoot)
}

// systemUUID is the SMBIOS UUID: spec.domain.firmware.uuid, else the VMI's
// metadata.uid.
func (b *builder) systemUUID() (string, error) {
	if fw := b.vmi.Spec.Domain.Firmware; fw != nil && fw.UUID != "" {
		id, err := uuid.Parse(string(fw.UUID))
		if err != nil || len(fw.UUID) != 36 {
			return "", fmt.Errorf("%w: spec.domain.firmware.uuid %q is not a UUID", ErrInvalid, fw.UUID)
		}
		return id.String(), nil
	}
	id, err := uuid.Parse(string(b.vmi.UID))
	if err != nil {
		return "", fmt.Errorf("%w: metadata.uid %q is not a UUID", ErrInvalid, b.vmi.UID)
	}
	return id.String(), nil
}

// smbiosSerialRE is printable ASCII (the CRD's pattern).
var smbiosSerialRE = regexp.MustCompile(`^[\x20-\x7e]{1,64}$`)

// firmware adds the SMBIOS serial and, for EFI, the OVMF flash images and
// the per-VM VARS copy the launcher makes.
func (b *builder) firmware() error {
	fw := b.vmi.Spec.Domain.Firmware
	if fw == nil {
		return nil
	}
	if fw.Serial != "" {
		if !smbiosSerialRE.MatchString(fw.Serial) {
			return fmt.Errorf("%w: spec.domain.firmware.serial %q: printable ASCII, at most 64 characters", ErrInvalid, fw.Serial)
		}
		b.add("-smbios", "type=1,serial="+escape(fw.Serial))
	}
	bl := fw.Bootloader
	if bl == nil || bl.EFI == nil {
		return nil
	}
	if bl.BIOS != nil {
		return fmt.Errorf("%w: spec.domain.firmware.bootloader: both bios and efi are set", ErrInvalid)
	}
	if p := bl.EFI.Persistent; p != nil && *p {
		return fmt.Errorf("%w: spec.domain.firmware.bootloader.efi.persistent: NVRAM kept across VMI restarts", ErrUnsupported)
	}
	if b.machineType != "q35" && !hasPrefix(b.machineType, "pc-q35") {
		return fmt.Errorf("%w: spec.domain.firmware.bootloader.efi needs machine type q35, not %q", ErrUnsupported, b.machineType)
	}
	code, vars := OVMFCode, OVMFVars
	if secureBoot(bl.EFI) {
		if f := b.vmi.Spec.Domain.Features; f == nil || !on(f.SMM) {
			return fmt.Errorf("%w: spec.domain.firmware.bootloader.efi.secureBoot requires spec.domain.features.smm", ErrInvalid)
		}
		code, vars = OVMFSecbootCode, OVMFSecbootVars
		// Only code running in SMM may write the varstore.
		b.add("-global", "driver=cfi.pflash01,property=secure,value=on")
	}
	nvram := b.in.Paths.EFIVars()
	b.prep = append(b.prep, launchspec.DiskPrep{Volume: "efi-vars", Kind: launchspec.FirmwareVars,
		Target: nvram, Format: "raw", SourcePath: vars})
	b.add("-blockdev", jsonArg(map[string]any{"driver": "file", "filename": code, "node-name": efiCodeNode, "read-only": true}),
		"-blockdev", jsonArg(map[string]any{"driver": "file", "filename": nvram, "node-name": efiVarsNode, "read-only": false}))
	return nil
}
