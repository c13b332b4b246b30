package qmp_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/nodevirt/nodevirt/qmp"
)

// TestQEMU_StorageMigration moves a guest with a node-local qcow2 overlay
// disk between two QEMUs the way the agent does: the target exports its
// own fresh overlay (over the same base) on NBD, the source mirrors the
// overlay's top into it while RAM migrates, and finishes the mirror at
// pre-switchover. What the guest wrote on the source is in the target's
// overlay, and the guest runs on.
func TestQEMU_StorageMigration(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	base := filepath.Join(dir, "base.img")
	if err := os.WriteFile(base, make([]byte, 16<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	overlay := func(name string) string {
		p := filepath.Join(dir, name)
		if out, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", "-F", "raw", "-b", base, p).CombinedOutput(); err != nil {
			t.Fatalf("qemu-img create: %v: %s", err, out)
		}
		return p
	}
	disk := func(path string) []string {
		return []string{
			"-blockdev", `{"driver":"file","filename":"` + path + `","node-name":"disk0-file"}`,
			"-blockdev", `{"driver":"qcow2","file":"disk0-file","node-name":"disk0-format"}`,
			"-device", "virtio-blk-pci,drive=disk0-format,id=disk0",
		}
	}
	src := startVM(t, vmConfig{Args: disk(overlay("src.qcow2"))})
	dstOverlay := overlay("dst.qcow2")
	dst := startVM(t, vmConfig{Incoming: "defer", Args: disk(dstOverlay)})
	sc, dc := src.DialQMP(t), dst.DialQMP(t)
	ctx := ctxT(t, 90*time.Second)

	src.WaitSerial(t, readyMarker, 1, bootTimeout)
	pattern := "nodevirt-storage-migration-pattern"
	if st, err := src.DialAgent(t).Run(ctx, "/bin/sh", "-c",
		"printf "+pattern+" | dd of=/dev/vda bs=512 seek=2048 conv=fsync"); err != nil || st.ExitCode == nil || *st.ExitCode != 0 {
		t.Fatalf("write the disk in the guest: %+v, %v", st, err)
	}

	// Target: listen for RAM, export the disk.
	nbd := filepath.Join(dst.dir, "nbd.sock")
	must(t, dc.MigrateIncoming(ctx, "unix:"+filepath.Join(dst.dir, "migrate.sock")))
	must(t, dc.NBDServerStartUnix(ctx, nbd))
	must(t, dc.BlockExportAddNBD(ctx, "mig-disk0", "disk0-format", "disk0-format", true))

	// Source: mirror the overlay's top, wait until it is ready.
	must(t, sc.BlockdevAddNBD(ctx, "mig-disk0-format", nbd, "disk0-format"))
	must(t, sc.BlockdevMirror(ctx, "mig-disk0-format", "disk0-format", "mig-disk0-format", "top"))
	waitJobs(ctx, t, sc, func(jobs []qmp.BlockJobInfo) bool { return len(jobs) == 1 && jobs[0].Ready })

	must(t, sc.MigrateSetCapabilities(ctx,
		qmp.MigrationCapability{Capability: "events", State: true},
		qmp.MigrationCapability{Capability: "pause-before-switchover", State: true}))
	// vCPUs stopped for the RAM transfer, as under TCG in the agent (see
	// TestQEMU_LiveMigration); the disk's mirror ran with the guest live.
	must(t, sc.Stop(ctx))
	must(t, sc.Migrate(ctx, "unix:"+filepath.Join(dst.dir, "migrate.sock")))
	waitMigration(ctx, t, sc, qmp.MigrationPreSwitch)
	// The guest stands still: finish the mirror, then switch over.
	must(t, sc.BlockJobCancel(ctx, "mig-disk0-format", false))
	waitJobs(ctx, t, sc, func(jobs []qmp.BlockJobInfo) bool { return len(jobs) == 0 })
	must(t, sc.BlockdevDel(ctx, "mig-disk0-format"))
	must(t, sc.MigrateContinue(ctx, qmp.MigrationPreSwitch))
	waitMigration(ctx, t, sc, qmp.MigrationCompleted)

	must(t, dc.BlockExportDel(ctx, "mig-disk0"))
	must(t, dc.NBDServerStop(ctx))
	waitRunState(ctx, t, dc, qmp.RunStatePaused, qmp.RunStateInMigrate)
	must(t, dc.Cont(ctx))
	if st, err := dst.DialAgent(t).Run(ctx, "/bin/sh", "-c", "dd if=/dev/vda of=/dev/null bs=512 skip=2048 count=1"); err != nil || st.ExitCode == nil || *st.ExitCode != 0 {
		t.Errorf("the guest on the target: %+v, %v", st, err)
	}
	must(t, dc.Quit(ctx))
	dst.Exited(10 * time.Second)
	out, err := exec.Command("qemu-io", "-r", "-f", "qcow2", "-c", "read -v 1048576 64", dstOverlay).CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte(pattern[:8])) {
		t.Errorf("the target's overlay lacks what the guest wrote on the source: %v\n%s", err, out)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func waitJobs(ctx context.Context, t *testing.T, c *qmp.Conn, ok func([]qmp.BlockJobInfo) bool) {
	t.Helper()
	for {
		jobs, err := c.QueryBlockJobs(ctx)
		must(t, err)
		if ok(jobs) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("block jobs %+v", jobs)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func waitMigration(ctx context.Context, t *testing.T, c *qmp.Conn, status string) {
	t.Helper()
	for {
		mi, err := c.QueryMigrate(ctx)
		must(t, err)
		if mi.Status == status {
			return
		}
		if mi.Status == qmp.MigrationFailed || mi.Status == qmp.MigrationCancelled {
			t.Fatalf("migration %s: %s", mi.Status, mi.ErrorDesc)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("migration %s, want %s", mi.Status, status)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// waitRunState polls c until QEMU's run state is want, failing on any
// state other than want and passing.
func waitRunState(ctx context.Context, t *testing.T, c *qmp.Conn, want, passing string) {
	t.Helper()
	for {
		st, err := c.QueryStatus(ctx)
		must(t, err)
		if st.Status == want {
			return
		}
		if st.Status != passing {
			t.Fatalf("run state %s, want %s, then %s", st.Status, passing, want)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("run state stuck in %s, want %s", st.Status, want)
		case <-time.After(10 * time.Millisecond):
		}
	}
}
