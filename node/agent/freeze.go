package agent

import (
	"context"
	"fmt"
	"time"

	"github.com/nodevirt/nodevirt/node/api"
	"github.com/nodevirt/nodevirt/qmp"
	"github.com/nodevirt/nodevirt/store"
)

// Guest filesystem freeze with a durable thaw deadline. The node API's
// Freeze commits Record.Intent.Freeze (the deadline) before
// guest-fsfreeze-freeze; the intent is cleared only after a thaw that
// succeeded. Whoever thaws — Unfreeze, or the reconcile (ActThaw) once the
// deadline passed — works from the record, so a guest frozen by an agent
// that was killed is thawed by the next one: its sync of every live record
// at start attaches the domain and plans the thaw at the deadline, or at
// once when it is past. A freeze that failed brings the deadline to now
// (the guest may be partly frozen); a thaw that failed keeps the intent
// and the sync fails, so the reconcile retries it with the work queue's
// backoff (and its periodic resync), with a warning event and a timeline
// entry each time. Thawing a guest that is not frozen is harmless.
//
// qemu-ga of a frozen guest refuses every command but ping, info, sync
// and the fsfreeze status and thaw, so a freeze of a frozen guest only
// renews the deadline, and the guest agent probe counts a refused OS info
// as connected (domain.probeAgent).

// ActThaw thaws a guest whose freeze deadline passed, or that is being
// deleted, and clears Intent.Freeze.
const ActThaw ActionKind = "Thaw"

// pollThaw is when to look again at an overdue freeze that cannot be
// thawed yet (guest agent not connected, vCPUs stopped); the guest
// agent's connect and QEMU's RESUME enqueue the VMI first.
const pollThaw = time.Second

// freezer is what freezing needs of a guest agent connection (qmp.Agent).
type freezer interface {
	FSFreezeFreeze(ctx context.Context) (int, error)
	FSFreezeThaw(ctx context.Context) (int, error)
	FSFreezeStatus(ctx context.Context) (string, error)
}

// freezeStatusFrozen is guest-fsfreeze-status of a frozen guest.
const freezeStatusFrozen = "frozen"

// freezePlan tells whether the reconcile must thaw the guest now, or else
// when to look again. It is pure.
func freezePlan(o *Observation) (act bool, requeue time.Duration) {
	if !o.liveRecord() || o.Record.Intent.Freeze == nil {
		return false, 0
	}
	if left := o.Record.Intent.Freeze.Deadline.Sub(o.Now); left > 0 {
		return false, left
	}
	if !o.canThaw() {
		return false, pollThaw
	}
	return true, 0
}

// canThaw reports whether the guest agent can thaw now: QEMU attached and
// running the guest, its agent connected.
func (o *Observation) canThaw() bool {
	r := o.Runtime
	return r.QMPConnected && r.RunState == qmp.RunStateRunning && r.AgentConnected
}

// thawBeforeStop reports whether a deleted VMI's frozen guest is to be
// thawed before its power button is pressed (a frozen guest's shutdown
// would block on its filesystems). It is pure.
func thawBeforeStop(o *Observation) bool {
	return o.liveRecord() && o.Record.Intent.Freeze != nil && o.canThaw()
}

// withThaw adds the freeze deadline's thaw (last) or its requeue to p.
func withThaw(o *Observation, p Plan) Plan {
	act, requeue := freezePlan(o)
	switch {
	case act:
		p.Actions = append(p.Actions, ActThaw)
	case requeue > 0 && (p.Requeue == 0 || requeue < p.Requeue):
		p.Requeue = requeue
	}
	return p
}

// migrating reports whether m is a migration under way (either role).
func migrating(m *store.Migration) bool {
	return m != nil && m.Ended.IsZero() && !m.Completed && !m.Failed
}

// freezerOf returns the guest agent of d able to freeze, nil when none is
// connected.
func freezerOf(d *domain) freezer {
	ga := d.guestAgent()
	if ga == nil {
		return nil
	}
	f, _ := ga.(freezer)
	return f
}

// guestFreezer returns uid's live domain and its guest agent, or why it
// cannot freeze or thaw (not running, no guest agent connected).
func (a *Agent) guestFreezer(ctx context.Context, uid string) (*domain, freezer, error) {
	d, err := a.liveDomain(ctx, uid)
	if err != nil {
		return nil, nil, err
	}
	if d.qmpConn() == nil {
		return nil, nil, fmt.Errorf("domain %s: %w", uid, api.ErrNotRunning)
	}
	ga := freezerOf(d)
	if ga == nil {
		return nil, nil, fmt.Errorf("domain %s: %w", uid, api.ErrNoGuestAgent)
	}
	return d, ga, nil
}

// Freeze persists a thaw deadline timeout from now, then freezes the
// guest's filesystems. A frozen guest only gets the new deadline.
func (a *Agent) Freeze(ctx context.Context, uid string, timeout time.Duration) error {
	if timeout <= 0 {
		return fmt.Errorf("domain %s: unfreeze timeout %v, want > 0", uid, timeout)
	}
	d, ga, err := a.guestFreezer(ctx, uid)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, a.cfg.CallTimeout)
	defer cancel()
	d.opMu.Lock()
	defer d.opMu.Unlock()
	rec, err := a.deps.Store.Get(ctx, uid)
	if err != nil {
		return err
	}
	switch {
	case rec.Intent.Stop != nil:
		return fmt.Errorf("domain %s is shutting down: %w", uid, api.ErrNotRunning)
	case rec.Intent.Paused || d.view().RunState != qmp.RunStateRunning:
		// The guest agent cannot answer with the vCPUs stopped.
		return fmt.Errorf("domain %s: %w", uid, api.ErrPaused)
	case migrating(rec.Migration):
		return fmt.Errorf("domain %s: %w", uid, api.ErrMigrating)
	}
	now := a.now()
	deadline := now.Add(timeout)
	_, err = a.deps.Store.Update(ctx, uid, func(r *store.Record) error {
		r.Intent.Freeze = &store.Freeze{Requested: now, Deadline: deadline}
		return nil
	}, a.event("FreezeRequested", fmt.Sprintf("node API, thaw by %s", deadline.UTC().Format(time.RFC3339Nano))))
	if err != nil {
		return fmt.Errorf("domain %s: persist freeze deadline: %w", uid, err)
	}
	a.loop.EnqueueAfter(uid, timeout) // the reconcile thaws at the deadline
	if st, err := ga.FSFreezeStatus(ctx); err == nil && st == freezeStatusFrozen {
		a.log.Info("guest frozen already: unfreeze deadline renewed", "uid", uid, "deadline", deadline)
		return nil
	}
	n, err := ga.FSFreezeFreeze(ctx)
	if err != nil {
		// Some filesystems may be frozen: thaw at once (the reconcile
		// retries until it succeeds).
		a.thawNow(ctx, uid, "FreezeFailed", err.Error())
		return fmt.Errorf("domain %s: guest-fsfreeze-freeze: %w", uid, err)
	}
	a.log.Info("guest filesystems frozen", "uid", uid, "filesystems", n, "deadline", deadline)
	return nil
}

// Unfreeze thaws the guest's filesystems, then clears the freeze intent.
// If the thaw fails the intent stays, due now, for the reconcile to retry.
func (a *Agent) Unfreeze(ctx context.Context, uid string) error {
	d, ga, err := a.guestFreezer(ctx, uid)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, a.cfg.CallTimeout)
	defer cancel()
	d.opMu.Lock()
	defer d.opMu.Unlock()
	n, err := ga.FSFreezeThaw(ctx)
	if err != nil {
		a.thawNow(ctx, uid, "UnfreezeFailed", err.Error())
		return fmt.Errorf("domain %s: guest-fsfreeze-thaw: %w", uid, err)
	}
	if err := a.clearFreeze(ctx, uid, "Thawed", fmt.Sprintf("node API unfreeze, %d filesystem(s)", n)); err != nil {
		return fmt.Errorf("domain %s: thawed, but: %w", uid, err)
	}
	a.log.Info("guest filesystems thawed", "uid", uid, "filesystems", n)
	a.enqueue(uid) // a migration held back by the freeze may start
	return nil
}

// thawNow brings a freeze intent's deadline to now (creating one: the
// guest may be frozen) and enqueues the VMI so the reconcile thaws it. A
// failed write leaves the old deadline, which still thaws the guest.
func (a *Agent) thawNow(ctx context.Context, uid, reason, msg string) {
	// The call that failed may have used up ctx.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.cfg.CallTimeout)
	defer cancel()
	now := a.now()
	_, err := a.deps.Store.Update(ctx, uid, func(r *store.Record) error {
		if r.Intent.Freeze == nil {
			r.Intent.Freeze = &store.Freeze{Requested: now}
		}
		r.Intent.Freeze.Deadline = now
		return nil
	}, a.event(reason, msg+"; thaw retried by the reconcile"))
	if err != nil {
		a.log.Warn("bring the thaw deadline forward", "uid", uid, "err", err)
	}
	a.enqueue(uid)
}

// clearFreeze clears the freeze intent after a thaw, with reason.
func (a *Agent) clearFreeze(ctx context.Context, uid, reason, msg string) error {
	_, err := a.deps.Store.Update(ctx, uid, func(r *store.Record) error {
		r.Intent.Freeze = nil
		return nil
	}, a.event(reason, msg))
	if err != nil {
		return fmt.Errorf("clear freeze intent: %w", err)
	}
	return nil
}

// thawDue is ActThaw: it thaws a guest whose freeze deadline passed (or
// that is being deleted) and clears the intent. A failed thaw is warned
// and returned, so the sync is retried with backoff; for a VMI being
// deleted it is only warned, lest it hold up the shutdown.
func (a *Agent) thawDue(ctx context.Context, o *Observation) error {
	d := a.domain(o.UID)
	ga := freezerOf(d)
	if ga == nil {
		return nil // disconnected meanwhile: its reconnect enqueues the VMI
	}
	d.opMu.Lock()
	defer d.opMu.Unlock()
	rec, err := a.deps.Store.Get(ctx, o.UID)
	if err != nil {
		return err
	}
	f := rec.Intent.Freeze
	if f == nil || (!o.deleting() && a.now().Before(f.Deadline)) {
		return nil // thawed or renewed meanwhile; the next plan requeues
	}
	why := "unfreeze deadline passed"
	if o.deleting() {
		why = "the VMI is being deleted"
	}
	n, err := ga.FSFreezeThaw(ctx)
	if err != nil {
		msg := fmt.Sprintf("thaw of the guest's filesystems (%s) failed, retried: %v", why, err)
		a.warn(o.VMI, "ThawFailed", msg)
		if aerr := a.deps.Store.AppendEvent(ctx, o.UID, a.event("ThawFailed", msg)); aerr != nil {
			a.log.Warn("timeline", "uid", o.UID, "err", aerr)
		}
		if o.deleting() {
			a.log.Warn("thaw before shutdown failed", "vmi", o.name(), "uid", o.UID, "err", err)
			return nil
		}
		return fmt.Errorf("guest-fsfreeze-thaw: %w", err)
	}
	msg := fmt.Sprintf("%s: %d filesystem(s) thawed", why, n)
	if err := a.update(ctx, o, func(r *store.Record) error {
		r.Intent.Freeze = nil
		return nil
	}, a.event("Thawed", msg)); err != nil {
		return fmt.Errorf("clear freeze intent: %w", err)
	}
	a.log.Info("guest filesystems thawed", "vmi", o.name(), "uid", o.UID, "reason", why, "filesystems", n,
		"late", a.now().Sub(f.Deadline).Round(time.Millisecond).String())
	a.normal(o.VMI, "Thawed", "Guest filesystems thawed: "+msg)
	return nil
}
