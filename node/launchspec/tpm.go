package launchspec

import (
	"fmt"
	"path/filepath"
)

// TPM asks the launcher to run swtpm (a TPM 2.0 emulator) beside QEMU. Its
// state lives in StateDir; QEMU's tpm-emulator backend connects to its
// control socket Socket (both in the pod's private directory, see
// Paths.TPMState and Paths.TPMSocket).
type TPM struct {
	StateDir string `json:"stateDir"`
	Socket   string `json:"socket"`
	// BIOSKernel is the -kernel file of a kernel boot with an initrd under
	// BIOS. The launcher refuses it when it is a PVH ELF image: QEMU 7.2's
	// PVH loader puts the initrd over the ACPI tables SeaBIOS moves down
	// for the TPM log, and the guest runs without ACPI. A bzImage (loaded
	// by SeaBIOS) and EFI are not affected.
	BIOSKernel string `json:"biosKernel,omitempty"`
}

// Validate checks that both paths are clean absolute paths.
func (t TPM) Validate() error {
	for _, p := range []string{t.StateDir, t.Socket} {
		if p == "" || !filepath.IsAbs(p) || filepath.Clean(p) != p {
			return fmt.Errorf("tpm: %q is not a clean absolute path", p)
		}
	}
	if t.BIOSKernel != "" && (!filepath.IsAbs(t.BIOSKernel) || filepath.Clean(t.BIOSKernel) != t.BIOSKernel) {
		return fmt.Errorf("tpm: kernel %q is not a clean absolute path", t.BIOSKernel)
	}
	return nil
}
