package qmp_test

// Tests of the test guest contract (hack/guest/README.md) that need no
// network: disk boot, NoCloud on ISO and vfat, ignore_acpi.

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nodevirt/nodevirt/hack/testenv"
	"github.com/nodevirt/nodevirt/qmp"
)

const userData = `#!/bin/sh
echo "user-data ran on $(hostname)"
exit 3
`

// writeNoCloud writes user-data and metaData into a new dir.
func writeNoCloud(t *testing.T, metaData string) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"user-data": userData,
		"meta-data": metaData,
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}

func lookTool(t *testing.T, name string) {
	t.Helper()
	_, err := exec.LookPath(name)
	testenv.Require(t, err == nil, name, "guest-deps")
}

// checkNoCloud waits for the user-data markers and the hostname.
func checkNoCloud(t *testing.T, vm *testVM, hostname string) {
	t.Helper()
	vm.WaitSerial(t, "NODEVIRT-USERDATA-BEGIN", 1, bootTimeout)
	end := vm.WaitSerial(t, "NODEVIRT-USERDATA-END", 1, 10*time.Second)
	if end != "NODEVIRT-USERDATA-END rc=3" {
		t.Errorf("end marker %q, want rc=3", end)
	}
	lines := vm.serial.Lines()
	var got []string
	in := false
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "NODEVIRT-USERDATA-BEGIN"):
			in = true
		case strings.HasPrefix(l, "NODEVIRT-USERDATA-END"):
			in = false
		case in:
			got = append(got, l)
		}
	}
	if diff := cmp.Diff([]string{"user-data ran on " + hostname}, got); diff != "" {
		t.Errorf("user-data output (-want +got):\n%s", diff)
	}
	a := vm.DialAgent(t)
	if h, err := a.HostName(ctxT(t, 10*time.Second)); err != nil || h != hostname {
		t.Errorf("HostName = %q, %v; want %q", h, err, hostname)
	}
}

// TestGuest_DiskBootNoCloudISO boots disk.img through SeaBIOS + syslinux
// with a NoCloud ISO on a SATA CD-ROM.
func TestGuest_DiskBootNoCloudISO(t *testing.T) {
	t.Parallel()
	guest := guestDir(t)
	lookTool(t, "genisoimage")
	iso := filepath.Join(t.TempDir(), "cidata.iso")
	run(t, "genisoimage", "-quiet", "-output", iso, "-volid", "cidata", "-joliet", "-rock", writeNoCloud(t, "instance-id: iid-iso\nlocal-hostname: vm-iso\n"))

	vm := startVM(t, vmConfig{
		Disk: filepath.Join(guest, "disk.img"),
		Drives: []string{
			"-drive", "file=" + iso + ",if=none,id=cd0,media=cdrom,readonly=on",
			"-device", "ide-cd,drive=cd0,bus=ide.0",
		},
	})
	ready := vm.WaitSerial(t, readyMarker, 1, bootTimeout)
	t.Logf("disk boot: %q after %v", ready, time.Since(vm.started))
	checkNoCloud(t, vm, "vm-iso")
}

// TestGuest_NoCloudVFATIgnoreACPI boots the kernel with a vfat CIDATA disk
// on virtio-blk and nodevirt.ignore_acpi=1.
func TestGuest_NoCloudVFATIgnoreACPI(t *testing.T) {
	t.Parallel()
	guestDir(t)
	lookTool(t, "mkfs.fat")
	lookTool(t, "mcopy")
	// JSON meta-data on one line, as some generators write it.
	src := writeNoCloud(t, `{"instance-id":"iid-vfat","local-hostname":"vm-vfat"}`+"\n")
	img := filepath.Join(t.TempDir(), "cidata.img")
	run(t, "mkfs.fat", "-C", "-n", "CIDATA", img, "2048")
	run(t, "mcopy", "-i", img, filepath.Join(src, "user-data"), filepath.Join(src, "meta-data"), "::")

	vm := startVM(t, vmConfig{
		Append: "nodevirt.ignore_acpi=1",
		Drives: []string{
			"-drive", "file=" + img + ",if=none,id=ci0,format=raw,readonly=on",
			"-device", "virtio-blk-pci,drive=ci0",
		},
	})
	c := vm.DialQMP(t)
	events := c.Subscribe(16, qmp.EventShutdown)
	vm.WaitSerial(t, readyMarker, 1, bootTimeout)
	checkNoCloud(t, vm, "vm-vfat")

	if err := c.SystemPowerdown(ctxT(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	vm.WaitSerial(t, "NODEVIRT-GUEST-POWERDOWN-IGNORED", 1, 10*time.Second)
	select {
	case e := <-events.Events():
		t.Errorf("guest shut down despite ignore_acpi: %+v", e)
	case <-time.After(2 * time.Second):
	}
	if st, err := c.QueryStatus(ctxT(t, 5*time.Second)); err != nil || st.Status != qmp.RunStateRunning {
		t.Errorf("status = %+v, %v; want running", st, err)
	}
}

// TestGuest_DiskQcow2MatchesRaw checks disk.qcow2 is disk.img converted.
func TestGuest_DiskQcow2MatchesRaw(t *testing.T) {
	guest := guestDir(t)
	lookTool(t, "qemu-img")
	out, err := exec.Command("qemu-img", "info", "--output=json", filepath.Join(guest, "disk.qcow2")).Output()
	if err != nil {
		t.Fatalf("qemu-img info: %v", err)
	}
	var info struct {
		Format      string `json:"format"`
		VirtualSize int64  `json:"virtual-size"`
	}
	if err := json.Unmarshal(out, &info); err != nil {
		t.Fatal(err)
	}
	raw, err := os.Stat(filepath.Join(guest, "disk.img"))
	if err != nil {
		t.Fatal(err)
	}
	if info.Format != "qcow2" || info.VirtualSize != raw.Size() {
		t.Errorf("disk.qcow2: %+v, want qcow2 of %d bytes", info, raw.Size())
	}
	run(t, "qemu-img", "compare", "-q", filepath.Join(guest, "disk.img"), filepath.Join(guest, "disk.qcow2"))
}
