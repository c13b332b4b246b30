package qmp_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodevirt/nodevirt/qmp"
)

// TestQEMU_LiveMigration migrates a running guest between two local QEMU
// processes over a unix socket and checks the target's guest agent sees
// the state written on the source.
//
// The guest's vCPUs are stopped for the transfer, as the agent does under
// TCG (node/agent/migrationmode.go): QEMU 7.2's TCG dirty tracking loses
// pages a running guest writes while pre-copy syncs its bitmap, and the
// target's kernel then oopses (docs/migration.md, "Transfer mode"). CI
// reproduced it here with a running guest under host load.
func TestQEMU_LiveMigration(t *testing.T) {
	t.Parallel()
	src := startVM(t, vmConfig{})
	dst := startVM(t, vmConfig{Incoming: "defer"})
	sc := src.DialQMP(t)
	dc := dst.DialQMP(t)
	srcEvents := sc.Subscribe(64, qmp.EventMigration, qmp.EventStop)
	dstEvents := dc.Subscribe(64, qmp.EventResume)

	src.WaitSerial(t, readyMarker, 1, bootTimeout)
	sa := src.DialAgent(t)
	ctx := ctxT(t, 60*time.Second)
	if st, err := sa.Run(ctx, "/bin/sh", "-c", "echo before-migration >/run/state"); err != nil || st.ExitCode == nil || *st.ExitCode != 0 {
		t.Fatalf("write state in guest: %+v, %v", st, err)
	}
	if st, err := dc.QueryStatus(ctx); err != nil || st.Status != qmp.RunStateInMigrate {
		t.Errorf("target status = %+v, %v; want inmigrate", st, err)
	}

	uri := "unix:" + filepath.Join(dst.dir, "migrate.sock")
	if err := dc.MigrateIncoming(ctx, uri); err != nil {
		t.Fatal(err)
	}
	events := qmp.MigrationCapability{Capability: "events", State: true}
	if err := sc.MigrateSetCapabilities(ctx, events); err != nil {
		t.Fatal(err)
	}
	bw := int64(10 << 30) // lift the 128 MiB/s default cap
	if err := sc.MigrateSetParameters(ctx, qmp.MigrationParameters{MaxBandwidth: &bw}); err != nil {
		t.Fatal(err)
	}
	if err := sc.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := sc.Migrate(ctx, uri); err != nil {
		t.Fatal(err)
	}
	var mi qmp.MigrationInfo
	for {
		var err error
		mi, err = sc.QueryMigrate(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if mi.Status == qmp.MigrationCompleted {
			break
		}
		if mi.Status == qmp.MigrationFailed || mi.Status == qmp.MigrationCancelled {
			t.Fatalf("migration %s: %s", mi.Status, mi.ErrorDesc)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("migration not completed: %+v", mi)
		case <-time.After(10 * time.Millisecond):
		}
	}
	elapsed := time.Since(start)
	// QEMU reports "completed" slightly before it fills in the times and
	// moves the source to postmigrate.
	for mi.TotalTime == nil || mi.Downtime == nil {
		var err error
		if mi, err = sc.QueryMigrate(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("migration times never reported: %+v", mi)
		case <-time.After(10 * time.Millisecond):
		}
	}
	var total, downtime int64
	if mi.TotalTime != nil {
		total = *mi.TotalTime
	}
	if mi.Downtime != nil {
		downtime = *mi.Downtime
	}
	var transferred int64
	if mi.RAM != nil {
		transferred = mi.RAM.Transferred
	}
	t.Logf("migration completed: %v observed, total-time %d ms, downtime %d ms, %d MiB transferred",
		elapsed, total, downtime, transferred>>20)

	// Events on the source: MIGRATION ... completed, and the STOP.
	var statuses []string
	sawStop := false
	for done := false; !done; {
		select {
		case e := <-srcEvents.Events():
			if e.Name == qmp.EventStop {
				sawStop = true
				continue
			}
			v, err := e.Typed()
			if err != nil {
				t.Fatal(err)
			}
			statuses = append(statuses, v.(*qmp.MigrationEvent).Status)
			done = statuses[len(statuses)-1] == qmp.MigrationCompleted
		case <-time.After(5 * time.Second):
			t.Fatalf("MIGRATION events %v, no completed", statuses)
		}
	}
	if !sawStop {
		t.Error("no STOP event on the source")
	}
	t.Logf("source MIGRATION events: %v", statuses)
	waitRunState(ctx, t, sc, qmp.RunStatePostMigrate, qmp.RunStateFinishMigrate)
	// The target arrives paused (QEMU keeps the source's run state); the
	// agent resumes it the same way.
	waitRunState(ctx, t, dc, qmp.RunStatePaused, qmp.RunStateInMigrate)
	if err := dc.Cont(ctx); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, dstEvents, qmp.EventResume, 10*time.Second)
	if st, err := dc.QueryStatus(ctx); err != nil || st.Status != qmp.RunStateRunning {
		t.Errorf("target status = %+v, %v; want running", st, err)
	}

	agentStart := time.Now()
	da := dst.DialAgent(t)
	t.Logf("target guest agent answered %v after completion", time.Since(agentStart))
	st, err := da.Run(ctx, "/bin/cat", "/run/state")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(st.OutData)); got != "before-migration" {
		t.Errorf("state on target = %q, want before-migration", got)
	}
	if err := sc.Quit(ctx); err != nil {
		t.Errorf("quit source: %v", err)
	}
	if !src.Exited(10 * time.Second) {
		t.Error("source QEMU still running after quit")
	}
}
