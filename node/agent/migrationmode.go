package agent

import (
	"context"
	"fmt"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/qmp"
	"github.com/nodevirt/nodevirt/store"
)

// transferMode is how the source moves the guest's memory, from QEMU's
// own query-kvm:
//
//   - under KVM, PreCopy: the guest runs while its memory is copied, the
//     pages it dirties are copied again, and it stops only for the last
//     round (downtime-limit). KVM's dirty log is exact.
//   - under TCG, Paused: the guest's vCPUs are stopped for the whole
//     transfer. QEMU 7.2's TCG dirty tracking loses pages a running Linux
//     guest writes while a pre-copy migration syncs its dirty bitmap
//     (measured: a guest rewriting a tmpfs file arrived with 2–15 of 32768
//     pages different from the source's final memory in 4 of 8 runs, and
//     oopsed on the target); with the vCPUs stopped the first pass is the
//     final memory and every page arrives as it was. Emulation is a
//     developer and CI setting; the downtime is the whole transfer.
func transferMode(kvm qmp.KVMInfo) v1.MigrationMode {
	if kvm.Enabled {
		return v1.MigrationPreCopy
	}
	return v1.MigrationPaused
}

// stopsGuest reports whether a migration in mode stops the guest itself:
// a Paused transfer of a guest QEMU runs now (runState, asked right
// before: the observation may predate the attach) that the user did not
// pause (a guest the user paused stays as it is, on either side).
func stopsGuest(mode v1.MigrationMode, userPaused bool, runState string) bool {
	return mode == v1.MigrationPaused && !userPaused && runState == qmp.RunStateRunning
}

// migrationMode is the record's mode, PreCopy for records written before
// modes were recorded.
func migrationMode(m *store.Migration) v1.MigrationMode {
	if m.Mode == "" {
		return v1.MigrationPreCopy
	}
	return v1.MigrationMode(m.Mode)
}

// resumeStoppedGuest resumes, after a failed or cancelled migration, the
// guest the source stopped for a Paused transfer (QEMU resumes only a
// guest that ran when the migration began), then persists that it did.
// A guest the user paused meanwhile stays paused.
func (a *Agent) resumeStoppedGuest(ctx context.Context, o *Observation) error {
	if !o.Record.Intent.Paused {
		if err := a.cont(ctx, o); err != nil {
			return fmt.Errorf("resume the guest after the failed migration: %w", err)
		}
	}
	return a.update(ctx, o, func(r *store.Record) error {
		r.Migration.StoppedGuest = false
		return nil
	}, a.event("MigrationGuestResumed", "the guest runs here again"))
}

// resumeArrivedGuest resumes the guest that arrived in this target QEMU,
// which starts with -S and so never runs a guest on its own (and a Paused
// transfer keeps the source's stopped run state anyway): it is the
// target's autostart, done once the source said completed.
func (a *Agent) resumeArrivedGuest(ctx context.Context, o *Observation) error {
	if err := a.cont(ctx, o); err != nil {
		return fmt.Errorf("resume the arrived guest: %w", err)
	}
	return a.update(ctx, o, func(*store.Record) error { return nil },
		a.event("MigrationGuestResumed", "the guest arrived paused and runs here"))
}

// cont resumes the domain's vCPUs (QMP cont) and notes the run state.
func (a *Agent) cont(ctx context.Context, o *Observation) error {
	mon, err := a.qmp(ctx, o)
	if err != nil {
		return err
	}
	if err := mon.Cont(ctx); err != nil {
		return err
	}
	a.domain(o.UID).setRunState(qmp.RunStateRunning)
	return nil
}
