package launcher_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/node/launchspec"
)

// TestLauncher_ImageVolumes: in a pod of the ImageVolumes shape the kernel
// and initrd are read straight from the kernelBoot image volume and a
// containerDisk's overlay is backed by the disk in its image volume: no
// copy, no holder process. The guest boots to its ready marker.
func TestLauncher_ImageVolumes(t *testing.T) {
	guest := guestDir(t)
	pd := newPod(t)
	pd.imageVolumes = true
	mountImage(t, pd.paths.KernelBootImage(), map[string]string{
		"vmlinux": filepath.Join(guest, "vmlinux"), "initrd.img": filepath.Join(guest, "initrd.img")})
	mountImage(t, pd.paths.ImageVolume("data"), map[string]string{"disk/disk.qcow2": filepath.Join(guest, "disk.qcow2")})
	vmi := testVMI(30, func(vmi *v1.VirtualMachineInstance) {
		kernelBoot("console=ttyS0 quiet panic=-1")(vmi)
		vmi.Spec.Domain.Devices.Disks = append(vmi.Spec.Domain.Devices.Disks, v1.Disk{Name: "data", Disk: &v1.DiskTarget{Bus: v1.DiskBusVirtio}})
		vmi.Spec.Volumes = append(vmi.Spec.Volumes, v1.Volume{Name: "data", ContainerDisk: &v1.ContainerDiskSource{Image: "guest"}})
	})
	spec := prepare(t, pd, guest, vmi)
	if _, err := os.Stat(pd.paths.Kernel()); err == nil {
		t.Errorf("a kernel was copied into the private directory")
	}
	_, c := startLauncher(t, pd)

	t0 := time.Now()
	if _, err := c.Launch(context.Background(), spec); err != nil {
		t.Fatalf("Launch: %v", err)
	}
	waitRunning(t, c)
	con := dialSerial(t, pd.paths.Socket(launchspec.SerialSocket))
	con.waitLine(t, "NODEVIRT-GUEST-READY", bootTimeout)
	t.Logf("launch -> guest ready marker (image volumes) %v", time.Since(t0).Round(time.Millisecond))
	backing, err := qemuImgBacking(pd.paths.Overlay("data"))
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(pd.paths.ImageVolume("data"), "disk", "disk.qcow2"); backing != want {
		t.Errorf("overlay backing file = %q, want %q", backing, want)
	}
}

// qemuImgBacking is the backing file an image names (qemu-img info).
func qemuImgBacking(image string) (string, error) {
	out, err := exec.Command("qemu-img", "info", "--output=json", "-U", image).Output()
	if err != nil {
		return "", fmt.Errorf("qemu-img info %s: %w", image, err)
	}
	var info struct {
		Backing string `json:"backing-filename"`
	}
	if err := json.Unmarshal(out, &info); err != nil {
		return "", err
	}
	return info.Backing, nil
}
