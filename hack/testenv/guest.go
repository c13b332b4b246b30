package testenv

import (
	"os/exec"
	"path/filepath"
	"testing"
)

// GuestDir returns $NODEVIRT_OUT/guest, the test guest `make guest-images`
// builds, after requiring (see Require) qemu-system-x86_64 on $PATH and
// each of files (e.g. "vmlinux", "initrd.img", "disk.qcow2") in it.
func GuestDir(t testing.TB, files ...string) string {
	t.Helper()
	_, err := exec.LookPath("qemu-system-x86_64")
	Require(t, err == nil, "qemu-system-x86_64", "guest-deps")
	out, err := OutDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(out, "guest")
	paths := make([]string, len(files))
	for i, f := range files {
		paths[i] = filepath.Join(dir, f)
	}
	RequireFiles(t, "guest-images", paths...)
	return dir
}
