package launcher_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/nodevirt/nodevirt/hack/testenv"
	"github.com/nodevirt/nodevirt/node/launchspec"
	"github.com/nodevirt/nodevirt/qmp"
)

// TestLauncher_MigratedAway: once an outgoing live migration completed,
// the source launcher stopped by SIGTERM quits QEMU at once and exits 0, so its pod completes as KubeVirt's source pods do, and
// its exit says migratedAway; the target launcher's QEMU runs the guest
// and does not count as migrated away.
func TestLauncher_MigratedAway(t *testing.T) {
	guest := guestDir(t)
	src, dst := newPod(t), newPod(t)
	vmi := testVMI(2, kernelBoot("console=ttyS0 quiet panic=-1"))
	srcSpec := prepare(t, src, guest, vmi)
	dstSpec := prepareFor(t, dst, guest, vmi, true)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	sp, sc := startLauncher(t, src)
	if _, err := sc.Launch(ctx, srcSpec); err != nil {
		t.Fatalf("Launch source: %v", err)
	}
	waitRunning(t, sc)
	dialSerial(t, src.paths.Socket(launchspec.SerialSocket)).waitLine(t, "NODEVIRT-GUEST-READY", bootTimeout)
	dp, dc := startLauncher(t, dst)
	if _, err := dc.Launch(ctx, dstSpec); err != nil {
		t.Fatalf("Launch target: %v", err)
	}
	waitRunning(t, dc)

	smon, err := qmp.Dial(ctx, src.paths.Socket(launchspec.QMPSocket))
	if err != nil {
		t.Fatal(err)
	}
	defer smon.Close()
	dmon, err := qmp.Dial(ctx, dst.paths.Socket(launchspec.QMPSocket))
	if err != nil {
		t.Fatal(err)
	}
	defer dmon.Close()
	uri := "unix:" + dst.paths.Socket("migration-in.sock")
	if err := dmon.MigrateIncoming(ctx, uri); err != nil {
		t.Fatal(err)
	}
	if err := smon.MigrateSetCapabilities(ctx, qmp.MigrationCapability{Capability: "events", State: true}); err != nil {
		t.Fatal(err)
	}
	bw := int64(8) << 30
	if err := smon.MigrateSetParameters(ctx, qmp.MigrationParameters{MaxBandwidth: &bw}); err != nil {
		t.Fatal(err)
	}
	if err := smon.Stop(ctx); err != nil { // TCG: a stopped guest migrates exactly (node/agent.transferMode)
		t.Fatal(err)
	}
	if err := smon.Migrate(ctx, uri); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "the source in postmigrate", func() error {
		st, err := smon.QueryStatus(ctx)
		if err == nil && st.Status != qmp.RunStatePostMigrate {
			err = fmt.Errorf("status %s", st.Status)
		}
		return err
	})
	// The target arrives paused (QEMU keeps the source's run state). A
	// cont while it is still inmigrate is lost (QEMU then sets the
	// source's state), so wait for paused first, as the agent does.
	testenv.Eventually(t, 30*time.Second, "the target paused", func() error {
		st, err := dmon.QueryStatus(ctx)
		if err == nil && st.Status != qmp.RunStatePaused {
			err = fmt.Errorf("status %s", st.Status)
		}
		return err
	})
	if err := dmon.Cont(ctx); err != nil {
		t.Fatal(err)
	}
	// The pod is deleted (SIGTERM): nothing to power off, QEMU is quit
	// at once instead of after the 2 s grace period.
	stopped := time.Now()
	if err := sp.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := sp.wait(t, 30*time.Second); code != 0 {
		t.Errorf("source launcher exited %d after its guest migrated away, want 0", code)
	}
	if took := time.Since(stopped); took > 1500*time.Millisecond {
		t.Errorf("SIGTERM -> exit took %v: the grace period was waited for a guest that is gone", took)
	}
	if e := readExit(t, src); !e.MigratedAway || e.GuestShutdown || e.Code != 0 || !e.Success() {
		t.Errorf("source exit %+v, want migratedAway and success", e)
	}

	// The target's guest runs; a host-side quit of it is no success.
	testenv.Eventually(t, 30*time.Second, "the target running", func() error {
		st, err := dmon.QueryStatus(ctx)
		if err == nil && st.Status != qmp.RunStateRunning {
			err = fmt.Errorf("status %s", st.Status)
		}
		return err
	})
	if err := dmon.Quit(ctx); err != nil {
		t.Fatal(err)
	}
	if code := dp.wait(t, 30*time.Second); code == 0 {
		t.Errorf("target launcher exited 0 after a host quit of a running guest")
	}
	if e := readExit(t, dst); e.MigratedAway {
		t.Errorf("target exit %+v: an incoming migration is not migrated away", e)
	}
}
