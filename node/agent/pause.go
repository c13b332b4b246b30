package agent

import (
	"context"
	"errors"
	"fmt"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/node/api"
	"github.com/nodevirt/nodevirt/store"
)

// ActPause re-applies a user's pause: QEMU runs the guest but the record's
// intent says paused (a pause whose QMP stop was lost in a crash, or a QEMU
// resumed behind the agent's back). Nothing in the reconcile ever resumes
// a guest: only Unpause does.
const ActPause ActionKind = "Pause"

// needsPause reports whether the plan must re-apply the user's pause: the
// intent says paused and QEMU runs the guest, or the domain is about to be
// (re-)attached (apply checks QEMU's state itself). It is pure.
func needsPause(o *Observation) bool {
	if !o.liveRecord() || !o.Record.Intent.Paused {
		return false
	}
	return !o.Runtime.QMPConnected || o.Runtime.RunState == "running"
}

// startsPaused reports whether the VMI asks to start with stopped vCPUs.
func startsPaused(vmi *v1.VirtualMachineInstance) bool {
	s := vmi.Spec.StartStrategy
	return s != nil && *s == v1.StartStrategyPaused
}

// Pause persists the user's intent to pause the VMI uid, then stops its
// vCPUs. A crash between the two is finished by the reconcile (ActPause).
func (a *Agent) Pause(ctx context.Context, uid string) error {
	return a.setPaused(ctx, uid, true)
}

// Unpause persists the intent to run, then resumes the vCPUs (or boots a
// VMI started paused).
func (a *Agent) Unpause(ctx context.Context, uid string) error {
	return a.setPaused(ctx, uid, false)
}

// setPaused reads no record: a pause is on the path users time, and a
// bbolt commit of the record (two fdatasyncs and its JSON) costs more than
// QEMU's stop, so the intent goes to the store's intent log (one
// fdatasync) and reaches the record in the background.
func (a *Agent) setPaused(ctx context.Context, uid string, paused bool) error {
	d := a.domainIfAny(uid)
	var conn MonitorConn
	if d != nil {
		conn = d.qmpConn()
	}
	if conn == nil {
		if _, err := a.liveDomain(ctx, uid); err != nil {
			return err
		}
		return fmt.Errorf("domain %s: %w", uid, api.ErrNotRunning)
	}
	ctx, cancel := context.WithTimeout(ctx, a.cfg.CallTimeout)
	defer cancel()
	d.opMu.Lock()
	defer d.opMu.Unlock()
	reason := "PauseRequested"
	if !paused {
		reason = "UnpauseRequested"
	}
	// One write to the store's intent log: durable before QEMU is told.
	err := a.deps.Store.SetPaused(ctx, uid, paused, a.event(reason, "node API"))
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("domain %s: %w", uid, api.ErrNoDomain)
	}
	if err != nil {
		return fmt.Errorf("domain %s: persist intent: %w", uid, err)
	}
	if paused {
		err = conn.Stop(ctx)
	} else {
		err = conn.Cont(ctx)
	}
	if err != nil {
		return fmt.Errorf("domain %s: %s: %w", uid, reason, err)
	}
	// The STOP/RESUME event updates the run state and enqueues the VMI;
	// enqueue anyway so the status follows even if the event was missed.
	d.setRunState(map[bool]string{true: "paused", false: "running"}[paused])
	a.enqueue(uid)
	return nil
}

// reapplyPause stops the vCPUs of a domain whose record says paused.
func (a *Agent) reapplyPause(ctx context.Context, o *Observation) error {
	d := a.domain(o.UID)
	conn := d.qmpConn()
	if conn == nil {
		return nil // not attached: the next sync attaches first
	}
	d.opMu.Lock()
	defer d.opMu.Unlock()
	rec, err := a.deps.Store.Get(ctx, o.UID)
	if err != nil {
		return err
	}
	if !rec.Intent.Paused {
		return nil // unpaused meanwhile
	}
	st, err := conn.QueryStatus(ctx)
	if err != nil {
		return err
	}
	if st.Status != "running" {
		return nil
	}
	if err := conn.Stop(ctx); err != nil {
		return err
	}
	d.setRunState("paused")
	a.log.Info("re-applied pause", "vmi", o.name(), "uid", o.UID)
	return a.deps.Store.AppendEvent(ctx, o.UID, a.event("PauseReapplied", "QEMU ran a guest the user paused"))
}

// liveDomain returns the runtime of the live record uid.
func (a *Agent) liveDomain(ctx context.Context, uid string) (*domain, error) {
	rec, err := a.deps.Store.Get(ctx, uid)
	if errors.Is(err, store.ErrNotFound) || (err == nil && rec.IsGone()) {
		return nil, fmt.Errorf("domain %s: %w", uid, api.ErrNoDomain)
	}
	if err != nil {
		return nil, err
	}
	d := a.domainIfAny(uid)
	if d == nil {
		return nil, fmt.Errorf("domain %s: %w", uid, api.ErrNotRunning)
	}
	return d, nil
}
