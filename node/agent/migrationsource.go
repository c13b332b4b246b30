package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/node/launchspec"
	"github.com/nodevirt/nodevirt/node/migration"
	"github.com/nodevirt/nodevirt/qmp"
	"github.com/nodevirt/nodevirt/store"
)

// The source's QMP settings (docs/migration.md, "QMP capabilities"):
//
//   - events on: MIGRATION events wake the sync at every status change,
//     no polling needed to see completion or failure.
//   - return-path on, at both ends: the source completes only once the
//     target has loaded the whole state (its SHUT message comes back on
//     the stream). Without it the source calls a migration complete when
//     its last byte is in the channel; a target lost after that (its
//     agent, which pipes the stream, killed) fails to load, and the guest
//     is lost at both ends. With it that migration fails and the guest
//     goes on at the source.
//   - auto-converge only when migrationConfiguration.allowAutoConverge:
//     it throttles the guest's vCPUs, which is the workload's cost.
//   - the guest runs during the transfer (PreCopy) under KVM and is
//     stopped for it (Paused) under TCG: see transferMode.
//   - post-copy and multifd are off: post-copy needs its switch-over
//     driven and makes a failure after the switch lose the guest (not
//     implemented this round); multifd is not measured yet over the
//     proxied unix sockets (the channel carries any number of streams).
//   - max-bandwidth is bandwidthPerMigration, and when that is 0 or unset
//     (unlimited, KubeVirt's default) unlimitedBandwidth, because QEMU's
//     own default caps a migration at 128 MiB/s.
//   - downtime-limit downtimeLimitMs: the guest's pause at the switch-over
//     is bounded by it when the remaining dirty memory allows; an idle
//     guest converges at once.
const (
	unlimitedBandwidth = int64(64) << 30 // bytes/s
	downtimeLimitMs    = int64(50)
)

// sourceCapabilities are the capabilities the source sets before migrate.
// With disks to move, pause-before-switchover stops the migration at the
// switch-over so the agent can finish the disk mirrors while the guest
// stands still (migrationdisks.go).
func sourceCapabilities(ms *v1.VirtualMachineInstanceMigrationState, disks bool) []qmp.MigrationCapability {
	autoConverge := false
	if ms != nil && ms.MigrationConfiguration != nil && ms.MigrationConfiguration.AllowAutoConverge != nil {
		autoConverge = *ms.MigrationConfiguration.AllowAutoConverge
	}
	return []qmp.MigrationCapability{
		{Capability: "events", State: true},
		{Capability: "return-path", State: true},
		{Capability: "auto-converge", State: autoConverge},
		{Capability: "pause-before-switchover", State: disks},
	}
}

// targetCapabilities are the capabilities the target sets before
// migrate-incoming: the ones both ends must agree on, and events.
func targetCapabilities(*v1.VirtualMachineInstanceMigrationState) []qmp.MigrationCapability {
	return []qmp.MigrationCapability{{Capability: "events", State: true}, {Capability: "return-path", State: true}}
}

// sourceParameters are the parameters the source sets before migrate.
func sourceParameters(ms *v1.VirtualMachineInstanceMigrationState) qmp.MigrationParameters {
	bw := unlimitedBandwidth
	if ms != nil && ms.MigrationConfiguration != nil && ms.MigrationConfiguration.BandwidthPerMigration != nil {
		if v := ms.MigrationConfiguration.BandwidthPerMigration.Value(); v > 0 {
			bw = v
		}
	}
	dl := downtimeLimitMs
	return qmp.MigrationParameters{MaxBandwidth: &bw, DowntimeLimit: &dl}
}

func setCapabilities(ctx context.Context, mon Migrator, caps []qmp.MigrationCapability) error {
	if err := mon.MigrateSetCapabilities(ctx, caps...); err != nil {
		return fmt.Errorf("migrate-set-capabilities: %w", err)
	}
	return nil
}

// migrator is the domain's QMP connection as a Migrator.
func (a *Agent) migrator(ctx context.Context, o *Observation) (Migrator, error) {
	conn, err := a.qmp(ctx, o)
	if err != nil {
		return nil, err
	}
	m, ok := conn.(Migrator)
	if !ok {
		return nil, errors.New("the QMP connection cannot migrate")
	}
	return m, nil
}

// migrateSource is one step of the outgoing migration: start it, follow
// it (completion, failure, abort, timeouts), or report how it ended.
func (a *Agent) migrateSource(ctx context.Context, o *Observation) error {
	ms := o.outgoing()
	m := o.recordMigration(string(ms.MigrationUID), roleSource)
	switch {
	case m == nil:
		return a.startMigration(ctx, o, ms)
	case m.State == migCompleted || m.State == migFailed:
		a.closeProxy(o.UID)
		if m.State == migFailed && m.StoppedGuest {
			if err := a.resumeStoppedGuest(ctx, o); err != nil {
				return err
			}
		}
		return a.applyMigrationState(ctx, o, ptr(sourceFields(o.Record.Migration, ms.AbortRequested)), v1.ManagerSourceAgent)
	case m.State == migMirroring:
		return a.followMirrors(ctx, o, ms, m)
	default:
		return a.followMigration(ctx, o, ms, m)
	}
}

// closers closes several proxies as one.
type closers []io.Closer

func (cs closers) Close() error {
	var errs []error
	for _, c := range cs {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// startMigration persists the source record, sets capabilities and
// parameters, opens the channel's proxy socket and has QEMU migrate to
// it; then it reports startTimestamp and mode.
func (a *Agent) startMigration(ctx context.Context, o *Observation, ms *v1.VirtualMachineInstanceMigrationState) error {
	m := &store.Migration{UID: string(ms.MigrationUID), Role: roleSource, State: migStarting,
		SourceNode: a.cfg.NodeName, TargetNode: ms.TargetNode, Address: ms.TargetNodeAddress, Started: a.now()}
	if err := a.update(ctx, o, func(r *store.Record) error {
		r.Migration = m
		return nil
	}, a.event("MigrationStarting", "to "+ms.TargetNode+" at "+ms.TargetNodeAddress)); err != nil {
		return err
	}
	mon, err := a.migrator(ctx, o)
	if err != nil {
		return a.failMigration(ctx, o, "QMP: "+err.Error(), false)
	}
	disks, err := localDisks(o.Record)
	if err != nil {
		return a.failMigration(ctx, o, err.Error(), false)
	}
	if err := setCapabilities(ctx, mon, sourceCapabilities(ms, len(disks) > 0)); err != nil {
		return a.failMigration(ctx, o, err.Error(), false)
	}
	if err := mon.MigrateSetParameters(ctx, sourceParameters(ms)); err != nil {
		return a.failMigration(ctx, o, "migrate-set-parameters: "+err.Error(), false)
	}
	if a.deps.Migration == nil {
		return a.failMigration(ctx, o, "this agent has no migration channel", false)
	}
	route := migration.Route{MigrationUID: m.UID, TargetNode: ms.TargetNode, Address: ms.TargetNodeAddress}
	proxy, err := a.deps.Migration.Listen(a.pod(o).Socket(migrationOutSocket), route)
	if err != nil {
		return a.failMigration(ctx, o, err.Error(), false)
	}
	proxies := closers{proxy}
	if len(disks) > 0 {
		route.Kind = migration.KindDisks
		dproxy, err := a.deps.Migration.Listen(a.pod(o).Socket(disksOutSocket), route)
		if err != nil {
			proxy.Close()
			return a.failMigration(ctx, o, err.Error(), false)
		}
		proxies = append(proxies, dproxy)
	}
	a.setProxy(o.UID, proxies)
	a.domain(o.UID).progress(-1, time.Time{}) // a fresh progress clock
	a.domain(o.UID).setMigrationStatus("")
	if len(disks) == 0 {
		return a.beginTransfer(ctx, o, mon)
	}
	if err := a.update(ctx, o, func(r *store.Record) error {
		r.Migration.State = migMirroring
		return nil
	}, a.event("MigrationMirroring", fmt.Sprintf("%d disk(s) to %s", len(disks), ms.TargetNode))); err != nil {
		return err
	}
	dm, err := diskMigrator(mon)
	if err != nil {
		return a.failMigration(ctx, o, err.Error(), false)
	}
	if err := startMirrors(ctx, dm, launchspec.DefaultPaths().Socket(disksOutSocket), disks); err != nil {
		return a.failMigration(ctx, o, err.Error(), false)
	}
	return a.applyMigrationState(ctx, o, ptr(sourceFields(o.Record.Migration, ms.AbortRequested)), v1.ManagerSourceAgent)
}

// beginTransfer moves the guest's state: it stops the guest first when
// the transfer mode says so, then has QEMU migrate to the channel's proxy
// socket, and reports startTimestamp and mode.
func (a *Agent) beginTransfer(ctx context.Context, o *Observation, mon Migrator) error {
	kvm, err := mon.QueryKVM(ctx)
	if err != nil {
		return a.failMigration(ctx, o, "query-kvm: "+err.Error(), false)
	}
	st, err := mon.QueryStatus(ctx)
	if err != nil {
		return a.failMigration(ctx, o, "query-status: "+err.Error(), false)
	}
	mode := transferMode(kvm)
	stop := stopsGuest(mode, o.Record.Intent.Paused, st.Status)
	m := o.Record.Migration
	ms := o.outgoing()
	if err := a.update(ctx, o, func(r *store.Record) error {
		r.Migration.State, r.Migration.Mode, r.Migration.StoppedGuest = migMigrating, string(mode), stop
		return nil
	}, a.event("MigrationRunning", "mode "+string(mode))); err != nil {
		return err
	}
	if stop {
		if err := mon.Stop(ctx); err != nil {
			return a.failMigration(ctx, o, "stop the guest for the transfer: "+err.Error(), false)
		}
	}
	if err := mon.Migrate(ctx, "unix:"+launchspec.DefaultPaths().Socket(migrationOutSocket)); err != nil {
		return a.failMigration(ctx, o, "migrate: "+err.Error(), false)
	}
	a.log.Info("migration started", "vmi", o.name(), "uid", o.UID, "migration", m.UID, "target", ms.TargetNode)
	return a.applyMigrationState(ctx, o, ptr(sourceFields(o.Record.Migration, ms.AbortRequested)), v1.ManagerSourceAgent)
}

// followMigration asks QEMU (the truth, also after an agent restart) how
// the migration goes and acts: completed, failed, or cancel on abort,
// timeout, or a lost channel.
func (a *Agent) followMigration(ctx context.Context, o *Observation, ms *v1.VirtualMachineInstanceMigrationState, m *store.Migration) error {
	mon, err := a.migrator(ctx, o)
	if err != nil {
		return err
	}
	mi, err := mon.QueryMigrate(ctx)
	if err != nil {
		return fmt.Errorf("query-migrate: %w", err)
	}
	if mi.Status == qmp.MigrationPreSwitch && a.hasProxy(o.UID) {
		// Held for the disks (pause-before-switchover): QEMU's own
		// status, not an event's, so a held migration is released once.
		// Without the proxy (this agent restarted) the streams are cut:
		// the in-flight path below cancels instead.
		if err := a.switchOver(ctx, o, mon); err != nil {
			// A migration that left pre-switchover meanwhile (an earlier
			// migrate-continue got through) is on its way to its end:
			// cancelling it now could leave the guest running at both
			// ends. Only one still held is cancelled.
			if now, qerr := mon.QueryMigrate(ctx); qerr == nil && now.Status != qmp.MigrationPreSwitch {
				a.log.Warn("switch-over: the migration left pre-switchover already; following it", "vmi", o.name(),
					"uid", o.UID, "status", now.Status, "err", err)
				return nil
			}
			reason := "finish the disk mirrors: " + err.Error()
			if err := a.update(ctx, o, func(r *store.Record) error {
				r.Migration.State, r.Migration.Reason = migAborting, reason
				return nil
			}, a.event("MigrationCancelling", reason)); err != nil {
				return err
			}
			if err := mon.MigrateCancel(ctx); err != nil {
				return fmt.Errorf("migrate_cancel: %w", err)
			}
		}
		return nil
	}
	if st := a.domain(o.UID).migrationStatus(); st != "" {
		// The events of this migration, seen by this process, win over
		// query-migrate's status (see domain.migStatus).
		mi.Status = st
	} else if mi.Status == qmp.MigrationCompleted && a.hasProxy(o.UID) {
		// Started by this process, no event yet: a "completed" without
		// postmigrate is an old incoming migration's.
		st, err := mon.QueryStatus(ctx)
		if err != nil {
			return fmt.Errorf("query-status: %w", err)
		}
		if st.Status != "postmigrate" {
			return nil
		}
	}
	switch mi.Status {
	case qmp.MigrationCompleted:
		mi, postmigrate, err := settleCompletion(ctx, mon, mi)
		if err != nil {
			return err
		}
		if !postmigrate {
			// An outgoing migration that completed leaves QEMU in
			// postmigrate; "completed" without it is this QEMU's own
			// incoming migration of earlier: ours never started.
			return a.failMigration(ctx, o, "the migration did not start (source agent restarted)", m.Aborted)
		}
		return a.completeMigration(ctx, o, mi)
	case qmp.MigrationFailed, qmp.MigrationCancelled:
		reason := m.Reason
		if reason == "" {
			reason = "QEMU: migration " + mi.Status
			if mi.ErrorDesc != "" {
				reason += ": " + mi.ErrorDesc
			}
		}
		return a.failMigration(ctx, o, reason, m.Aborted)
	case "", qmp.MigrationNone:
		return a.failMigration(ctx, o, "the migration did not start (source agent restarted)", m.Aborted)
	}
	// In flight.
	if reason, abort := a.cancelReason(o, ms, m, mi); reason != "" {
		if err := a.update(ctx, o, func(r *store.Record) error {
			r.Migration.State, r.Migration.Reason, r.Migration.Aborted = migAborting, reason, abort
			return nil
		}, a.event("MigrationCancelling", reason)); err != nil {
			return err
		}
		if err := mon.MigrateCancel(ctx); err != nil {
			return fmt.Errorf("migrate_cancel: %w", err)
		}
		if abort {
			return a.applyMigrationState(ctx, o, ptr(sourceFields(o.Record.Migration, true)), v1.ManagerSourceAgent)
		}
	}
	return nil
}

// settleCompletion waits (briefly) for what QEMU fills in after it reports
// completed: the run state postmigrate, total time and downtime. It
// reports whether QEMU reached postmigrate.
func settleCompletion(ctx context.Context, mon Migrator, mi qmp.MigrationInfo) (qmp.MigrationInfo, bool, error) {
	const tries, pause = 50, 40 * time.Millisecond
	postmigrate := false
	for i := range tries {
		st, err := mon.QueryStatus(ctx)
		if err != nil {
			return mi, false, fmt.Errorf("query-status: %w", err)
		}
		postmigrate = st.Status == "postmigrate"
		// QEMU sets the status before it computes the times: until then
		// they read 0.
		if postmigrate && mi.TotalTime != nil && *mi.TotalTime > 0 && mi.Downtime != nil && *mi.Downtime > 0 {
			return mi, true, nil
		}
		if i == tries-1 {
			break
		}
		select {
		case <-ctx.Done():
			return mi, false, ctx.Err()
		case <-time.After(pause):
		}
		if mi, err = mon.QueryMigrate(ctx); err != nil {
			return mi, false, fmt.Errorf("query-migrate: %w", err)
		}
	}
	return mi, postmigrate, nil
}

// cancelReason says why a running migration is to be cancelled: the
// controller's abort request, a lost channel (the agent restarted and its
// proxy with it), or a timeout of migrationConfiguration.
func (a *Agent) cancelReason(o *Observation, ms *v1.VirtualMachineInstanceMigrationState, m *store.Migration, mi qmp.MigrationInfo) (string, bool) {
	if m.State == migAborting {
		return "", false // cancel already sent; QEMU reports cancelled
	}
	if ms.AbortRequested {
		return "aborted by request (migration deleted)", true
	}
	if !a.hasProxy(o.UID) {
		return "the source agent restarted during the migration", false
	}
	completion, progress := timeouts(o.VMI, ms)
	now := a.now()
	if completion > 0 && now.Sub(m.Started) > completion {
		return fmt.Sprintf("migration did not complete within %v (completionTimeoutPerGiB)", completion), false
	}
	if progress > 0 && mi.RAM != nil {
		if last := a.domain(o.UID).progress(mi.RAM.Remaining, now); now.Sub(last) > progress {
			return fmt.Sprintf("migration made no progress for %v (progressTimeout)", progress), false
		}
	}
	return "", false
}

// timeouts are the completion timeout (completionTimeoutPerGiB × guest
// memory, at least one GiB's worth) and the progress timeout.
func timeouts(vmi *v1.VirtualMachineInstance, ms *v1.VirtualMachineInstanceMigrationState) (completion, progress time.Duration) {
	perGiB, prog := v1.DefaultCompletionTimeoutPerGiB, v1.DefaultProgressTimeout
	if c := ms.MigrationConfiguration; c != nil {
		if c.CompletionTimeoutPerGiB != nil {
			perGiB = *c.CompletionTimeoutPerGiB
		}
		if c.ProgressTimeout != nil {
			prog = *c.ProgressTimeout
		}
	}
	gib := 1.0
	if m := vmi.Spec.Domain.Memory; m != nil && m.Guest != nil {
		gib = max(gib, float64(m.Guest.Value())/float64(1<<30))
	}
	return time.Duration(float64(perGiB)*gib) * time.Second, time.Duration(prog) * time.Second
}

// completeMigration persists and reports the completed migration.
func (a *Agent) completeMigration(ctx context.Context, o *Observation, mi qmp.MigrationInfo) error {
	var downtime, total int64
	if mi.Downtime != nil {
		downtime = *mi.Downtime
	}
	if mi.TotalTime != nil {
		total = *mi.TotalTime
	}
	if o.Record.Migration.StoppedGuest {
		// QEMU counts its downtime from its own stop at the switch-over;
		// the guest of a Paused transfer stood still from the agent's
		// stop, before the transfer began.
		downtime = max(downtime, total)
	}
	if err := a.update(ctx, o, func(r *store.Record) error {
		r.Migration.State, r.Migration.Completed, r.Migration.Ended = migCompleted, true, a.now()
		r.Migration.DowntimeMs, r.Migration.TotalMs = downtime, total
		return nil
	}, a.event("MigrationCompleted", fmt.Sprintf("downtime %d ms, total %d ms", downtime, total))); err != nil {
		return err
	}
	a.closeProxy(o.UID)
	a.log.Info("migration completed", "vmi", o.name(), "uid", o.UID, "migration", o.Record.Migration.UID,
		"downtimeMs", downtime, "totalMs", total)
	a.normal(o.VMI, "Migrated", fmt.Sprintf("migrated to %s (downtime %d ms, total %d ms)", o.Record.Migration.TargetNode, downtime, total))
	ms := o.outgoing()
	return a.applyMigrationState(ctx, o, ptr(sourceFields(o.Record.Migration, ms != nil && ms.AbortRequested)), v1.ManagerSourceAgent)
}

// failMigration persists and reports a failed migration; the guest keeps
// running here (QEMU resumes it after a failed or cancelled migration).
func (a *Agent) failMigration(ctx context.Context, o *Observation, reason string, aborted bool) error {
	if err := a.update(ctx, o, func(r *store.Record) error {
		r.Migration.State, r.Migration.Failed, r.Migration.Ended = migFailed, true, a.now()
		r.Migration.Reason, r.Migration.Aborted = reason, aborted
		return nil
	}, a.event("MigrationFailed", reason)); err != nil {
		return err
	}
	a.closeProxy(o.UID)
	a.abandonMirrors(ctx, o)
	a.log.Warn("migration failed", "vmi", o.name(), "uid", o.UID, "migration", o.Record.Migration.UID, "reason", reason)
	a.warn(o.VMI, "MigrationFailed", reason)
	if o.Record.Migration.StoppedGuest {
		if err := a.resumeStoppedGuest(ctx, o); err != nil {
			return err
		}
	}
	ms := o.outgoing()
	return a.applyMigrationState(ctx, o, ptr(sourceFields(o.Record.Migration, ms != nil && ms.AbortRequested)), v1.ManagerSourceAgent)
}

func (a *Agent) setProxy(uid string, p interface{ Close() error }) {
	a.mu.Lock()
	old := a.proxies[uid]
	a.proxies[uid] = p
	a.mu.Unlock()
	if old != nil {
		old.Close()
	}
}

func (a *Agent) hasProxy(uid string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.proxies[uid] != nil
}

// closeProxy closes the outgoing channel of uid, if any, in the
// background: it lets the streams drain first (the tail of a completed
// migration may still be in flight).
func (a *Agent) closeProxy(uid string) {
	a.mu.Lock()
	p := a.proxies[uid]
	delete(a.proxies, uid)
	a.mu.Unlock()
	if p != nil {
		go p.Close()
	}
}

func ptr[T any](v T) *T { return &v }
