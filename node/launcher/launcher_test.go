package launcher_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/node/cloudinit"
	"github.com/nodevirt/nodevirt/node/launcher"
	"github.com/nodevirt/nodevirt/node/launchspec"
	"github.com/nodevirt/nodevirt/node/launchspec/convert"
	"github.com/nodevirt/nodevirt/qmp"
)

const userData = "#!/bin/sh\necho hello-from-user-data\nexit 3\n"

// testVMI is a small VMI with a NoCloud disk on virtio-blk (loaded before
// the guest's cidata scan, so the scan never races a slow SATA probe);
// mutate adds the boot source.
func testVMI(grace int64, mutate func(*v1.VirtualMachineInstance)) *v1.VirtualMachineInstance {
	off := false
	vmi := &v1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Name: "guest", Namespace: "test", UID: "c0ffee00-0000-4000-8000-000000000001"},
		Spec: v1.VirtualMachineInstanceSpec{
			TerminationGracePeriodSeconds: &grace,
			Domain: v1.DomainSpec{
				Memory: &v1.Memory{Guest: resource.NewQuantity(256<<20, resource.BinarySI)},
				Devices: v1.Devices{
					AutoattachGraphicsDevice: &off,
					Disks:                    []v1.Disk{{Name: "cidata", Disk: &v1.DiskTarget{Bus: v1.DiskBusVirtio}}},
				},
			},
			Volumes: []v1.Volume{{Name: "cidata", CloudInitNoCloud: &v1.CloudInitNoCloudSource{UserData: userData}}},
		},
	}
	mutate(vmi)
	return vmi
}

func kernelBoot(args string) func(*v1.VirtualMachineInstance) {
	return func(vmi *v1.VirtualMachineInstance) {
		vmi.Spec.Domain.Firmware = &v1.Firmware{KernelBoot: &v1.KernelBoot{
			KernelArgs: args,
			Container:  &v1.KernelBootContainer{Image: "guest", KernelPath: "/vmlinux", InitrdPath: "/initrd.img"},
		}}
	}
}

// prepare writes what the agent and the init containers write into the
// pod (kernel files through `nodevirt-launcher copy`, the NoCloud ISO)
// and builds the spec.
func prepare(t *testing.T, pd *pod, guest string, vmi *v1.VirtualMachineInstance) launchspec.Spec {
	t.Helper()
	return prepareFor(t, pd, guest, vmi, false)
}

// prepareFor is prepare, for a live migration's target when incoming.
func prepareFor(t *testing.T, pd *pod, guest string, vmi *v1.VirtualMachineInstance, incoming bool) launchspec.Spec {
	t.Helper()
	if vmi.Spec.Domain.Firmware != nil && !pd.imageVolumes {
		cp := startProc(t, buildLauncher(t), "copy", "--to", filepath.Dir(pd.paths.Kernel()),
			filepath.Join(guest, "vmlinux")+"=kernel", filepath.Join(guest, "initrd.img")+"=initrd")
		if code := cp.wait(t, 30*time.Second); code != 0 {
			t.Fatalf("nodevirt-launcher copy exited %d: %s", code, cp.stderr.String())
		}
	}
	cfg, err := cloudinit.NewConfig(vmi, "cidata", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := cloudinit.WriteFile(pd.paths.CloudInitISO("cidata"), cfg, -1, -1); err != nil {
		t.Fatal(err)
	}
	spec, err := convert.Build(convert.Input{VMI: vmi, Node: convert.NodeFacts{KVM: convert.KVM{Reason: "test runs under TCG"}},
		AllowEmulation: true, Paths: pd.paths, Incoming: incoming, ImageVolumes: pd.imageVolumes})
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

// TestLauncher_KernelBootShutdown: kernelBoot guest with a NoCloud script,
// idempotent launch, SO_PEERCRED pids, the agent's QMP beside the
// launcher's, RSS, then SIGTERM -> ACPI power-down -> guest shutdown -> 0.
func TestLauncher_KernelBootShutdown(t *testing.T) {
	guest := guestDir(t)
	pd := newPod(t)
	spec := prepare(t, pd, guest, testVMI(30, kernelBoot("console=ttyS0 quiet panic=-1")))
	lp, c := startLauncher(t, pd)
	ctx := context.Background()

	t0 := time.Now()
	if _, err := c.Launch(ctx, spec); err != nil {
		t.Fatalf("Launch: %v", err)
	}
	st := waitRunning(t, c)
	tRunning := time.Since(t0)
	con := dialSerial(t, pd.paths.Socket(launchspec.SerialSocket))
	con.waitLine(t, "NODEVIRT-GUEST-READY", bootTimeout)
	tReady := time.Since(t0)
	t.Logf("launch -> QEMU running %v, -> guest ready marker %v", tRunning.Round(time.Millisecond), tReady.Round(time.Millisecond))

	con.waitLine(t, "NODEVIRT-USERDATA-BEGIN", bootTimeout)
	con.waitLine(t, "hello-from-user-data", 10*time.Second)
	if got := con.waitLine(t, "NODEVIRT-USERDATA-END", 10*time.Second); got != "NODEVIRT-USERDATA-END rc=3" {
		t.Errorf("user-data end marker = %q, want rc=3", got)
	}

	// The same spec again is a no-op; another one is refused.
	if again, err := c.Launch(ctx, spec); err != nil || again.QEMUPid != st.QEMUPid {
		t.Errorf("second Launch of the same spec = %+v, %v; want a no-op", again, err)
	}
	other := spec
	other.GracePeriodSeconds++
	if err := other.Seal(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Launch(ctx, other); !errors.Is(err, launcher.ErrConflict) {
		t.Errorf("Launch of a different spec: err = %v, want ErrConflict", err)
	}

	// SO_PEERCRED gives the launcher's and QEMU's pids.
	if pid, err := launcher.PeerPID(ctx, pd.paths.Socket(launchspec.LauncherSocket)); err != nil || pid != lp.cmd.Process.Pid {
		t.Errorf("PeerPID(launcher.sock) = %d, %v; want %d", pid, err, lp.cmd.Process.Pid)
	}
	if pid, err := launcher.PeerPID(ctx, pd.paths.Socket(launchspec.QMPSocket)); err != nil || pid != st.QEMUPid {
		t.Errorf("PeerPID(qmp.sock) = %d, %v; want %d", pid, err, st.QEMUPid)
	}

	// The agent's QMP connection works beside the launcher's monitor and
	// sees the shutdown.
	mon, err := qmp.Dial(ctx, pd.paths.Socket(launchspec.QMPSocket))
	if err != nil {
		t.Fatal(err)
	}
	defer mon.Close()
	if s, err := mon.QueryStatus(ctx); err != nil || s.Status != "running" {
		t.Errorf("query-status = %+v, %v", s, err)
	}
	events := mon.Subscribe(16, qmp.EventShutdown)

	rss, hwm := rssKiB(t, lp.cmd.Process.Pid)
	t.Logf("launcher RSS with QEMU running: %d KiB (peak %d KiB)", rss, hwm)
	if hwm > 10*1024 {
		t.Errorf("launcher peak RSS %d KiB exceeds the 10 MiB budget", hwm)
	}

	tStop := time.Now()
	if err := lp.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	con.waitLine(t, "NODEVIRT-GUEST-POWERDOWN", 30*time.Second)
	if code := lp.wait(t, 60*time.Second); code != 0 {
		t.Errorf("launcher exit code %d after a guest shutdown, want 0", code)
	}
	t.Logf("SIGTERM -> launcher exited %v", time.Since(tStop).Round(time.Millisecond))
	e := readExit(t, pd)
	if !e.GuestShutdown || e.Code != 0 || e.Signal != "" || e.Reason != "guest-shutdown" {
		t.Errorf("exit = %+v, want a guest shutdown with code 0", e)
	}
	select {
	case ev := <-events.Events():
		if !strings.Contains(string(ev.Data), `"guest-shutdown"`) {
			t.Errorf("agent's SHUTDOWN event = %s", ev.Data)
		}
	case <-time.After(5 * time.Second):
		t.Errorf("the agent's QMP connection saw no SHUTDOWN event")
	}
}

// TestLauncher_ContainerDiskCrash: a containerDisk held by a real
// `hold-disk` process boots from its qcow2 overlay; SIGKILL of QEMU is
// recorded as a crash and the launcher exits non-zero.
func TestLauncher_ContainerDiskCrash(t *testing.T) {
	guest := guestDir(t)
	pd := newPod(t)
	holder := startProc(t, buildLauncher(t), "hold-disk", "--pid-file", pd.paths.HolderPIDFile("root"))
	one := uint(1)
	vmi := testVMI(30, func(vmi *v1.VirtualMachineInstance) {
		// The NoCloud ISO on a SATA CD-ROM, KubeVirt's usual cdrom.
		vmi.Spec.Domain.Devices.Disks = []v1.Disk{
			{Name: "root", BootOrder: &one, Disk: &v1.DiskTarget{Bus: v1.DiskBusVirtio}},
			{Name: "cidata", CDRom: &v1.CDRomTarget{Bus: v1.DiskBusSATA}},
		}
		// The holder's root is the host's /, so the image path is absolute.
		vmi.Spec.Volumes = append(vmi.Spec.Volumes, v1.Volume{Name: "root",
			ContainerDisk: &v1.ContainerDiskSource{Image: "guest", Path: filepath.Join(guest, "disk.qcow2")}})
	})
	spec := prepare(t, pd, guest, vmi)
	lp, c := startLauncher(t, pd)

	t0 := time.Now()
	if _, err := c.Launch(context.Background(), spec); err != nil {
		t.Fatalf("Launch: %v", err)
	}
	st := waitRunning(t, c)
	con := dialSerial(t, pd.paths.Socket(launchspec.SerialSocket))
	con.waitLine(t, "NODEVIRT-GUEST-READY", bootTimeout)
	t.Logf("launch -> guest ready marker (disk boot) %v", time.Since(t0).Round(time.Millisecond))
	con.waitLine(t, "NODEVIRT-USERDATA-END", bootTimeout)

	overlay := pd.paths.Overlay("root")
	if _, err := os.Stat(overlay); err != nil {
		t.Errorf("overlay: %v", err)
	}

	if err := syscall.Kill(st.QEMUPid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if code := lp.wait(t, 30*time.Second); code == 0 {
		t.Errorf("launcher exited 0 after QEMU was killed")
	}
	e := readExit(t, pd)
	if e.GuestShutdown || e.Signal != "killed" || e.Code != -1 {
		t.Errorf("exit = %+v, want a crash by SIGKILL", e)
	}
	_ = holder.cmd.Process.Signal(syscall.SIGTERM)
	if code := holder.wait(t, 10*time.Second); code != 0 {
		t.Errorf("hold-disk exited %d on SIGTERM", code)
	}
}

// TestLauncher_GracePeriod: a guest that ignores ACPI is quit after the
// grace period; that is not a guest shutdown.
func TestLauncher_GracePeriod(t *testing.T) {
	guest := guestDir(t)
	pd := newPod(t)
	spec := prepare(t, pd, guest, testVMI(2, kernelBoot("console=ttyS0 quiet panic=-1 nodevirt.ignore_acpi=1")))
	lp, c := startLauncher(t, pd)
	if _, err := c.Launch(context.Background(), spec); err != nil {
		t.Fatalf("Launch: %v", err)
	}
	waitRunning(t, c)
	con := dialSerial(t, pd.paths.Socket(launchspec.SerialSocket))
	con.waitLine(t, "NODEVIRT-GUEST-READY", bootTimeout)
	// acpid is up once the late init steps ran.
	con.waitLine(t, "NODEVIRT-USERDATA-END", bootTimeout)

	t0 := time.Now()
	_ = lp.cmd.Process.Signal(syscall.SIGTERM)
	con.waitLine(t, "NODEVIRT-GUEST-POWERDOWN-IGNORED", 30*time.Second)
	if code := lp.wait(t, 30*time.Second); code == 0 {
		t.Errorf("launcher exited 0 although the guest did not shut down")
	}
	took := time.Since(t0)
	if took < 2*time.Second || took > 10*time.Second {
		t.Errorf("SIGTERM -> exit took %v, want the 2 s grace period (+ linger)", took)
	}
	e := readExit(t, pd)
	if e.GuestShutdown || e.Reason != "host-qmp-quit" {
		t.Errorf("exit = %+v, want a host quit", e)
	}
}

// TestLauncher_StopBeforeLaunch: SIGTERM with no spec ends the launcher
// with 0 at once.
func TestLauncher_StopBeforeLaunch(t *testing.T) {
	pd := newPod(t)
	lp, _ := startLauncher(t, pd)
	rss, _ := rssKiB(t, lp.cmd.Process.Pid)
	t.Logf("launcher RSS while waiting: %d KiB", rss)
	_ = lp.cmd.Process.Signal(syscall.SIGTERM)
	if code := lp.wait(t, 10*time.Second); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
}
