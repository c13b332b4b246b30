package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/node/launchspec"
	"github.com/nodevirt/nodevirt/qmp"
	"github.com/nodevirt/nodevirt/store"
)

// Storage migration of node-local disks (docs/migration.md, "Disks"):
// containerDisk overlays and emptyDisks live in the launcher pod, so the
// target pod starts with fresh ones (the overlay over the same,
// digest-pinned image). The target QEMU exports them on an NBD server in
// its pod; the source QEMU mirrors each disk's own data (a mirror with
// sync "top": the overlay, not its backing image) into that export over
// the agents' channel while RAM migrates, and the mirrors are finished at
// QEMU's pre-switchover pause, when the guest stands still, so the
// target's disks are complete when the guest resumes there. QEMU's older
// "block" migration capability cannot find disks attached with -blockdev.
//
// Nothing of this is persisted beyond store.Migration.State: the block
// jobs and NBD nodes are QEMU's, named after the disks (mirrorPrefix),
// found again by name after an agent restart and removed when a
// migration ends either way.

// Sockets of the disk streams in the launcher pod's sockets directory:
// the target QEMU's NBD server, and the source agent's channel proxy the
// source QEMU's NBD client connects to.
const (
	disksInSocket  = "migration-disks-in.sock"
	disksOutSocket = "migration-disks-out.sock"
)

// mirrorPrefix names the source's NBD client nodes and mirror jobs, and
// the target's exports: mirrorPrefix + the disk's block node.
const mirrorPrefix = "mig-"

// localDisks are the block nodes (format layer) of rec's disks whose data
// lives in the pod: what a migration copies. Nil without a launch spec.
func localDisks(rec *store.Record) ([]string, error) {
	if rec == nil || len(rec.Spec) == 0 {
		return nil, nil
	}
	var spec launchspec.Spec
	if err := json.Unmarshal(rec.Spec, &spec); err != nil {
		return nil, fmt.Errorf("launch spec: %w", err)
	}
	local := map[string]bool{}
	for _, p := range spec.Disks {
		if p.Kind == launchspec.ContainerDisk || p.Kind == launchspec.EmptyDisk {
			local[p.Volume] = true
		}
	}
	var nodes []string
	for _, d := range spec.Devices {
		if d.Kind == launchspec.DeviceDisk && local[d.Name] && d.Node != "" {
			nodes = append(nodes, d.Node)
		}
	}
	return nodes, nil
}

// followMirrors waits for the disk mirrors to catch up, then moves the
// guest's state; an abort, a timeout or a lost channel fails the
// migration before the guest was touched.
func (a *Agent) followMirrors(ctx context.Context, o *Observation, ms *v1.VirtualMachineInstanceMigrationState, m *store.Migration) error {
	if reason, abort := a.cancelReason(o, ms, m, qmp.MigrationInfo{}); reason != "" {
		return a.failMigration(ctx, o, reason, abort)
	}
	mon, err := a.migrator(ctx, o)
	if err != nil {
		return err
	}
	dm, err := diskMigrator(mon)
	if err != nil {
		return a.failMigration(ctx, o, err.Error(), false)
	}
	disks, err := localDisks(o.Record)
	if err != nil {
		return a.failMigration(ctx, o, err.Error(), false)
	}
	ready, err := mirrorsReady(ctx, dm, disks)
	if err != nil {
		return a.failMigration(ctx, o, err.Error(), false)
	}
	if !ready {
		return nil // polled (pollMigration)
	}
	return a.beginTransfer(ctx, o, mon)
}

// switchOver finishes the disk mirrors while QEMU holds the migration at
// pre-switchover (the guest stands still), then lets it go on.
func (a *Agent) switchOver(ctx context.Context, o *Observation, mon Migrator) error {
	dm, err := diskMigrator(mon)
	if err != nil {
		return err
	}
	disks, err := localDisks(o.Record)
	if err != nil {
		return err
	}
	if err := finishMirrors(ctx, dm, disks, false); err != nil {
		return err
	}
	return dm.MigrateContinue(ctx, qmp.MigrationPreSwitch)
}

// abandonMirrors ends the disk mirrors of a failed migration, if any,
// and removes their NBD client nodes: the guest's disks stay here.
func (a *Agent) abandonMirrors(ctx context.Context, o *Observation) {
	disks, err := localDisks(o.Record)
	if err != nil || len(disks) == 0 {
		return
	}
	mon, err := a.migrator(ctx, o)
	if err != nil {
		return // QEMU is gone or unreachable: nothing of the mirrors is left to end
	}
	dm, err := diskMigrator(mon)
	if err == nil {
		err = finishMirrors(ctx, dm, disks, true)
	}
	if err != nil {
		a.log.Warn("migration failed: end the disk mirrors", "vmi", o.name(), "uid", o.UID, "err", err)
	}
}

// DiskMigrator is the part of a QMP connection that moves disks.
type DiskMigrator interface {
	QueryBlockJobs(ctx context.Context) ([]qmp.BlockJobInfo, error)
	BlockdevAddNBD(ctx context.Context, nodeName, path, export string) error
	BlockdevDel(ctx context.Context, nodeName string) error
	BlockdevMirror(ctx context.Context, jobID, device, target, sync string) error
	BlockJobCancel(ctx context.Context, id string, force bool) error
	NBDServerStartUnix(ctx context.Context, path string) error
	NBDServerStop(ctx context.Context) error
	BlockExportAddNBD(ctx context.Context, id, nodeName, name string, writable bool) error
	BlockExportDel(ctx context.Context, id string) error
	MigrateContinue(ctx context.Context, state string) error
}

// diskMigrator is mon as a DiskMigrator.
func diskMigrator(mon Migrator) (DiskMigrator, error) {
	d, ok := mon.(DiskMigrator)
	if !ok {
		return nil, fmt.Errorf("the QMP connection cannot migrate disks")
	}
	return d, nil
}

// exportDisks starts the target QEMU's NBD server on path and exports
// nodes, writable, each under its node name. A server left by an earlier
// attempt (this agent's, or the one's before a restart) is stopped first,
// with its exports: nothing has connected before the target reports
// ready.
func exportDisks(ctx context.Context, mon DiskMigrator, path string, nodes []string) error {
	_ = mon.NBDServerStop(ctx) // none running is fine
	if err := mon.NBDServerStartUnix(ctx, path); err != nil {
		return fmt.Errorf("nbd-server-start: %w", err)
	}
	for _, n := range nodes {
		if err := mon.BlockExportAddNBD(ctx, mirrorPrefix+n, n, n, true); err != nil {
			return fmt.Errorf("block-export-add %s: %w", n, err)
		}
	}
	return nil
}

// unexportDisks removes the exports and stops the NBD server; what is
// not there is fine.
func unexportDisks(ctx context.Context, mon DiskMigrator, nodes []string) {
	for _, n := range nodes {
		_ = mon.BlockExportDel(ctx, mirrorPrefix+n)
	}
	_ = mon.NBDServerStop(ctx)
}

// startMirrors connects an NBD client node to each disk's export through
// the channel proxy at path and starts mirroring the disk's top into it.
// It runs once per migration: a failure, or a restart of the agent,
// fails the migration, and finishMirrors removes what was started.
func startMirrors(ctx context.Context, mon DiskMigrator, path string, nodes []string) error {
	for _, n := range nodes {
		id := mirrorPrefix + n
		if err := mon.BlockdevAddNBD(ctx, id, path, n); err != nil {
			return fmt.Errorf("blockdev-add nbd %s: %w", n, err)
		}
		if err := mon.BlockdevMirror(ctx, id, n, id, "top"); err != nil {
			return fmt.Errorf("blockdev-mirror %s: %w", n, err)
		}
	}
	return nil
}

// mirrorsReady reports whether every disk's mirror caught up (ready);
// an error when one is gone or failed.
func mirrorsReady(ctx context.Context, mon DiskMigrator, nodes []string) (bool, error) {
	jobs, err := mon.QueryBlockJobs(ctx)
	if err != nil {
		return false, fmt.Errorf("query-block-jobs: %w", err)
	}
	byID := map[string]qmp.BlockJobInfo{}
	for _, j := range jobs {
		byID[j.Device] = j
	}
	ready := true
	for _, n := range nodes {
		j, ok := byID[mirrorPrefix+n]
		switch {
		case !ok:
			return false, fmt.Errorf("the mirror of disk %s ended", n)
		case j.Error != "":
			return false, fmt.Errorf("the mirror of disk %s: %s", n, j.Error)
		case !j.Ready:
			ready = false
		}
	}
	return ready, nil
}

// finishMirrors ends every mirror of nodes and removes its NBD client
// node. Without force a ready mirror completes (the target holds the
// disk); with force it is abandoned (a failed or cancelled migration).
// It waits up to mirrorFinishTimeout for the jobs to go.
func finishMirrors(ctx context.Context, mon DiskMigrator, nodes []string, force bool) error {
	want := map[string]bool{}
	for _, n := range nodes {
		want[mirrorPrefix+n] = true
	}
	deadline := time.Now().Add(mirrorFinishTimeout)
	cancelled := map[string]bool{}
	for {
		jobs, err := mon.QueryBlockJobs(ctx)
		if err != nil {
			return fmt.Errorf("query-block-jobs: %w", err)
		}
		left := 0
		for _, j := range jobs {
			if !want[j.Device] {
				continue
			}
			left++
			if !cancelled[j.Device] {
				if err := mon.BlockJobCancel(ctx, j.Device, force); err != nil {
					return fmt.Errorf("block-job-cancel %s: %w", j.Device, err)
				}
				cancelled[j.Device] = true
			}
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d disk mirror(s) still running after %v", left, mirrorFinishTimeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	for id := range want {
		_ = mon.BlockdevDel(ctx, id) // a node never added is fine
	}
	return nil
}

// mirrorFinishTimeout bounds finishing the mirrors at the switch-over: a
// ready mirror has only the writes of its last moments left.
const mirrorFinishTimeout = 30 * time.Second
