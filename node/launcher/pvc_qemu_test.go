package launcher_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/hack/testenv"
	"github.com/nodevirt/nodevirt/node/cloudinit"
	"github.com/nodevirt/nodevirt/node/launchspec"
	"github.com/nodevirt/nodevirt/node/launchspec/convert"
)

// pvcMarker is what the guest writes at the start of its PVC disk.
const pvcMarker = "NODEVIRT-PVC-MARKER-1"

// pvcUserData finds the PVC disk (the largest virtio disk: the other is
// the NoCloud ISO), prints the marker if the disk holds it, else writes
// it (fsync) and says so.
const pvcUserData = `#!/bin/sh
dev=; max=0
for b in /sys/block/vd*; do s=$(cat $b/size); [ "$s" -gt "$max" ] && { max=$s; dev=/dev/${b##*/}; }; done
m=$(dd if=$dev bs=64 count=1 2>/dev/null | tr -d '\000\n')
case "$m" in
` + pvcMarker + `) echo "PVC-FOUND $dev";;
*) echo ` + pvcMarker + ` | dd of=$dev conv=fsync 2>/dev/null && sync && echo "PVC-WROTE $dev";;
esac
`

// TestLauncher_PVCSurvivesRestart boots the test guest with a PVC disk in
// filesystem mode (disk.img the launcher creates in the volume's
// directory) and in block mode (a loop device's node at the pod's device
// path), the guest writes a marker, the VM is shut down and started again
// in a new pod on the same volume, and the marker is still there.
func TestLauncher_PVCSurvivesRestart(t *testing.T) {
	guest := guestDir(t)
	testenv.Require(t, os.Geteuid() == 0, "root (loop device, device node)", "test-launcher")
	_, err := exec.LookPath("losetup")
	testenv.Require(t, err == nil, "losetup (util-linux)", "cluster-packages")

	t.Run("filesystem", func(t *testing.T) {
		pvcs := t.TempDir() // the volume's mount: <pvcs>/data
		if err := os.Mkdir(filepath.Join(pvcs, "data"), 0o755); err != nil {
			t.Fatal(err)
		}
		run := func(want string) {
			bootPVC(t, guest, pvcs, "", convert.Input{PVCCapacities: map[string]int64{"data": 64 << 20}}, want)
		}
		run("PVC-WROTE")
		img := filepath.Join(pvcs, "data", launchspec.PVCImageName)
		fi, err := os.Stat(img)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() != convert.PVCImageSize(64<<20) {
			t.Errorf("disk.img size %d, want %d", fi.Size(), convert.PVCImageSize(64<<20))
		}
		head := make([]byte, len(pvcMarker))
		f, err := os.Open(img)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = f.Read(head)
		f.Close()
		if string(head) != pvcMarker {
			t.Errorf("disk.img starts with %q, want the guest's marker", head)
		}
		run("PVC-FOUND")
	})

	t.Run("block", func(t *testing.T) {
		backing := filepath.Join(t.TempDir(), "backing.img")
		if err := os.WriteFile(backing, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(backing, 64<<20); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command("losetup", "--find", "--show", backing).CombinedOutput()
		if err != nil {
			t.Fatalf("losetup: %v: %s", err, out)
		}
		loop := strings.TrimSpace(string(out))
		t.Cleanup(func() {
			if out, err := exec.Command("losetup", "--detach", loop).CombinedOutput(); err != nil {
				t.Errorf("losetup --detach %s: %v: %s", loop, err, out)
			}
		})
		var st unix.Stat_t
		if err := unix.Stat(loop, &st); err != nil {
			t.Fatal(err)
		}
		// The pod's device directory, as the kubelet makes it for a
		// volumeDevice: a node of the same device.
		block := t.TempDir()
		if err := unix.Mknod(filepath.Join(block, "data"), unix.S_IFBLK|0o660, int(st.Rdev)); err != nil {
			t.Fatal(err)
		}
		in := convert.Input{BlockPVCs: map[string]bool{"data": true}}
		bootPVC(t, guest, "", block, in, "PVC-WROTE")
		b := make([]byte, len(pvcMarker))
		f, err := os.Open(backing)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = f.Read(b)
		f.Close()
		if !bytes.Equal(b, []byte(pvcMarker)) {
			t.Errorf("the loop device's backing file starts with %q, want the guest's marker", b)
		}
		bootPVC(t, guest, "", block, in, "PVC-FOUND")
	})
}

// bootPVC runs the guest in a new pod whose PVC volume "data" is under
// pvcs (filesystem) or block, waits for the user-data line want, then
// shuts the guest down through the launcher's SIGTERM.
func bootPVC(t *testing.T, guest, pvcs, block string, in convert.Input, want string) {
	t.Helper()
	pd := newPod(t)
	if pvcs != "" {
		pd.paths.PVCs = pvcs
	}
	if block != "" {
		pd.paths.Block = block
	}
	vmi := testVMI(30, kernelBoot("console=ttyS0 quiet panic=-1"))
	vmi.Spec.Volumes[0].CloudInitNoCloud.UserData = pvcUserData
	vmi.Spec.Domain.Devices.Disks = append(vmi.Spec.Domain.Devices.Disks, v1.Disk{Name: "data", Disk: &v1.DiskTarget{Bus: v1.DiskBusVirtio}})
	vmi.Spec.Volumes = append(vmi.Spec.Volumes, v1.Volume{Name: "data", PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}})

	cp := startProc(t, buildLauncher(t), "copy", "--to", filepath.Dir(pd.paths.Kernel()),
		filepath.Join(guest, "vmlinux")+"=kernel", filepath.Join(guest, "initrd.img")+"=initrd")
	if code := cp.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("nodevirt-launcher copy exited %d: %s", code, cp.stderr.String())
	}
	cfg, err := cloudinit.NewConfig(vmi, "cidata", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := cloudinit.WriteFile(pd.paths.CloudInitISO("cidata"), cfg, -1, -1); err != nil {
		t.Fatal(err)
	}
	in.VMI, in.Paths, in.AllowEmulation = vmi, pd.paths, true
	in.Node = convert.NodeFacts{KVM: convert.KVM{Reason: "test runs under TCG"}}
	spec, err := convert.Build(in)
	if err != nil {
		t.Fatal(err)
	}
	lp, c := startLauncher(t, pd)
	t0 := time.Now()
	if _, err := c.Launch(context.Background(), spec); err != nil {
		t.Fatalf("Launch: %v", err)
	}
	waitRunning(t, c)
	con := dialSerial(t, pd.paths.Socket(launchspec.SerialSocket))
	got := con.waitLine(t, "PVC-", bootTimeout)
	if !strings.HasPrefix(got, want) {
		t.Fatalf("guest said %q, want %s", got, want)
	}
	t.Logf("launch -> %q in %v", got, time.Since(t0).Round(time.Millisecond))
	if err := lp.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := lp.wait(t, 60*time.Second); code != 0 {
		t.Errorf("launcher exit code %d after a guest shutdown, want 0", code)
	}
}
