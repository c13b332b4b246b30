package launcher

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckTPMKernel(t *testing.T) {
	dir := t.TempDir()
	elf := filepath.Join(dir, "vmlinux")
	bz := filepath.Join(dir, "bzImage")
	if err := os.WriteFile(elf, []byte("\x7fELF\x02\x01\x01"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A bzImage starts with the boot sector (the "MZ" of its PE header).
	if err := os.WriteFile(bz, []byte("MZ\x00\x00 HdrS"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path, err string
	}{
		{"", ""},
		{bz, ""},
		{elf, "spec.domain.devices.tpm with spec.domain.firmware.kernelBoot under BIOS"},
		{filepath.Join(dir, "missing"), "no such file"},
	} {
		err := checkTPMKernel(tc.path)
		if (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("checkTPMKernel(%q) = %v, want %q", tc.path, err, tc.err)
		}
	}
}
