package migration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodevirt/nodevirt/hack/testenv"
	"github.com/nodevirt/nodevirt/node/launchspec/convert"
	"github.com/nodevirt/nodevirt/qmp"
)

// The floor of a migration: the same guest (kernel, initrd, memory size,
// workload) migrated between two bare QEMU processes on this host over a
// unix socket, with the agent's settings (events, unlimited bandwidth,
// downtime-limit 50 ms) and its transfer mode (the vCPUs stopped for the
// transfer under TCG, see node/agent.transferMode) — no Kubernetes, no
// agents, no TLS channel, no network setup.

// bareVM is one QEMU process started by the test.
type bareVM struct {
	dir string
	cmd *exec.Cmd
	mon *qmp.Conn
}

// floorAccel is the accelerator the launcher would choose on this host.
func floorAccel() []string {
	if convert.DetectKVM(os.DirFS("/")).Usable {
		return []string{"-accel", "kvm", "-cpu", "host"}
	}
	return []string{"-accel", "tcg,tb-size=64", "-cpu", "max"}
}

// startBare starts QEMU with the test guest and memMiB of memory, waiting
// for an incoming migration when incoming. It is killed when the test ends.
func startBare(t *testing.T, memMiB int, incoming bool) *bareVM {
	t.Helper()
	guest := testenv.GuestDir(t, "vmlinux", "initrd.img")
	dir, err := os.MkdirTemp("", "nvfloor") // short: unix socket paths
	if err != nil {
		t.Fatal(err)
	}
	args := append(floorAccel(),
		"-machine", "q35", "-m", fmt.Sprint(memMiB), "-smp", "1",
		"-nodefaults", "-no-user-config", "-display", "none",
		"-kernel", filepath.Join(guest, "vmlinux"), "-initrd", filepath.Join(guest, "initrd.img"),
		"-append", "console=ttyS0 quiet panic=-1",
		"-qmp", "unix:"+filepath.Join(dir, "qmp.sock")+",server=on,wait=off",
		"-serial", "file:"+filepath.Join(dir, "serial.log"),
		"-device", "virtio-serial-pci,id=vser0",
		"-chardev", "socket,id=qga0,path="+filepath.Join(dir, "qga.sock")+",server=on,wait=off",
		"-device", "virtserialport,bus=vser0.0,chardev=qga0,name=org.qemu.guest_agent.0")
	if incoming {
		args = append(args, "-incoming", "defer")
	}
	vm := &bareVM{dir: dir, cmd: exec.Command("qemu-system-x86_64", args...)}
	vm.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := vm.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		t.Fatalf("start QEMU: %v", err)
	}
	t.Cleanup(func() {
		if vm.mon != nil {
			vm.mon.Close()
		}
		_ = vm.cmd.Process.Kill()
		_ = vm.cmd.Wait()
		os.RemoveAll(dir)
	})
	testenv.Eventually(t, 10*time.Second, "QMP of the floor's QEMU", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		c, err := qmp.Dial(ctx, filepath.Join(dir, "qmp.sock"))
		vm.mon = c
		return err
	})
	return vm
}

// startWorkload waits for the guest's ready marker and, with dirty,
// starts the e2e guests' memory dirtier through the guest agent.
func (vm *bareVM) startWorkload(t *testing.T, dirty bool) {
	t.Helper()
	testenv.Eventually(t, 90*time.Second, "the floor guest's ready marker", func() bool {
		b, _ := os.ReadFile(filepath.Join(vm.dir, "serial.log"))
		return strings.Contains(string(b), "NODEVIRT-GUEST-READY")
	})
	if !dirty {
		return
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	a, err := qmp.DialAgent(ctx, filepath.Join(vm.dir, "qga.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if st, err := a.Run(ctx, "/bin/sh", "-c", dirtier); err != nil || st.ExitCode == nil || *st.ExitCode != 0 {
		t.Fatalf("start the dirtier in the floor guest: %+v, %v", st, err)
	}
	time.Sleep(2 * time.Second) // a steady stream of dirty pages
}

// floorHop is one bare migration's figures.
type floorHop struct {
	mode     string
	total    time.Duration // QMP total-time
	downtime time.Duration // the guest stood still: QMP downtime, or stop -> resumed on the target
}

// migrateBare moves src's guest to a new incoming QEMU and returns the
// figures and the new QEMU, which then runs the guest.
func migrateBare(t *testing.T, src *bareVM, memMiB int) (floorHop, *bareVM) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	dst := startBare(t, memMiB, true)
	uri := "unix:" + filepath.Join(dst.dir, "migrate.sock")
	must := func(what string, err error) {
		if err != nil {
			t.Fatalf("floor migration: %s: %v", what, err)
		}
	}
	must("migrate-incoming", dst.mon.MigrateIncoming(ctx, uri))
	must("capabilities", src.mon.MigrateSetCapabilities(ctx, qmp.MigrationCapability{Capability: "events", State: true}))
	bw, dl := int64(64)<<30, int64(50)
	must("parameters", src.mon.MigrateSetParameters(ctx, qmp.MigrationParameters{MaxBandwidth: &bw, DowntimeLimit: &dl}))
	kvm, err := src.mon.QueryKVM(ctx)
	must("query-kvm", err)
	h := floorHop{mode: "PreCopy"}
	stopped := time.Now()
	if !kvm.Enabled {
		h.mode = "Paused"
		must("stop", src.mon.Stop(ctx))
	}
	// The outgoing migration's MIGRATION events, not query-migrate's
	// status: on a QEMU that was itself a migration target, QEMU 7.2
	// reports the incoming status ("completed") there.
	events := src.mon.Subscribe(64, qmp.EventMigration)
	defer events.Close()
	must("migrate", src.mon.Migrate(ctx, uri))
	for done := false; !done; {
		select {
		case ev := <-events.Events():
			v, err := ev.Typed()
			must("MIGRATION event", err)
			switch v.(*qmp.MigrationEvent).Status {
			case qmp.MigrationCompleted:
				done = true
			case qmp.MigrationFailed, qmp.MigrationCancelled:
				t.Fatalf("floor migration %s", v.(*qmp.MigrationEvent).Status)
			}
		case <-ctx.Done():
			t.Fatalf("floor migration not completed: %v", ctx.Err())
		}
	}
	var mi qmp.MigrationInfo
	testenv.Eventually(t, 10*time.Second, "the floor migration's times", func() error {
		// QEMU fills them in right after it announced completed.
		mi, err = src.mon.QueryMigrate(ctx)
		if err == nil && (mi.TotalTime == nil || mi.Downtime == nil || *mi.TotalTime == 0) {
			err = fmt.Errorf("times not reported yet: %+v", mi)
		}
		return err
	})
	testenv.Eventually(t, time.Minute, "the floor target out of inmigrate", func() error {
		st, err := dst.mon.QueryStatus(ctx)
		if err == nil && st.Status == qmp.RunStateInMigrate {
			err = fmt.Errorf("status %s", st.Status)
		}
		return err
	})
	if h.mode == "Paused" {
		must("cont on the target", dst.mon.Cont(ctx))
		h.downtime = time.Since(stopped)
	} else {
		h.downtime = time.Duration(*mi.Downtime) * time.Millisecond
	}
	h.total = time.Duration(*mi.TotalTime) * time.Millisecond
	_ = src.mon.Quit(ctx)
	return h, dst
}
