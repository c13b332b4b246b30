package agent

import (
	"context"
	"fmt"
	"time"

	"github.com/nodevirt/nodevirt/node/api"
	"github.com/nodevirt/nodevirt/qmp"
	"github.com/nodevirt/nodevirt/store"
)

// Soft reboot without a guest agent ("fake reboot", as libvirt does it):
// QEMU has no ACPI reboot, so the agent makes a guest shutdown pause QEMU
// instead of ending it (set-action shutdown=pause), presses the power
// button, and when the guest has shut down (run state "shutdown") resets
// and resumes it, then restores the shutdown action.
//
// Record.Intent.Reboot is committed before the first side effect, and
// Resetting before the reset, so a crash at any point is finished by the
// reconcile (ActReboot): a guest found in "shutdown" is reset; a reboot
// found Resetting with a running guest is complete; past the deadline the
// guest ignored the power button and the shutdown action is restored.
// While the intent is set the "shutdown" run state is not the end of the
// VM: it maps to no domain state, so the status is left alone, and QEMU
// does not exit, so the launcher reports no exit.

// ActReboot finishes or abandons a soft reboot (Intent.Reboot).
const ActReboot ActionKind = "Reboot"

// rebootPlan tells whether the reconcile must act on a reboot intent now,
// or else when to look again. It is pure.
func rebootPlan(o *Observation) (act bool, requeue time.Duration) {
	if !o.liveRecord() || o.Record.Intent.Reboot == nil {
		return false, 0
	}
	if !o.Runtime.QMPConnected {
		// Attach first (after an agent restart), then look again: the
		// guest may be held in "shutdown" with no event to come.
		return false, pollStarting
	}
	r := o.Record.Intent.Reboot
	if o.Runtime.RunState == qmp.RunStateShutdown || r.Resetting || !o.Now.Before(r.Deadline) {
		return true, 0
	}
	return false, min(pollStopping, r.Deadline.Sub(o.Now))
}

// rebootMonitor is what a fake reboot needs of QMP beyond Monitor.
type rebootMonitor interface {
	Monitor
	SystemReset(ctx context.Context) error
	SetShutdownAction(ctx context.Context, action string) error
}

// acpiReboot runs a soft reboot through the power button for the live
// domain d and waits until the guest was reset, the intent's deadline
// passed, or ctx ended.
func (a *Agent) acpiReboot(ctx context.Context, uid string, d *domain) error {
	done, err := a.startACPIReboot(ctx, uid, d)
	if err != nil {
		return err
	}
	a.enqueue(uid) // the reconcile watches the deadline
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("domain %s: soft reboot still under way: %w", uid, ctx.Err())
	}
}

// startACPIReboot commits the intent, sets the shutdown action to pause and
// presses the power button, under the domain's opMu.
func (a *Agent) startACPIReboot(ctx context.Context, uid string, d *domain) (<-chan error, error) {
	mon, ok := d.qmpConn().(rebootMonitor)
	if !ok || mon == nil {
		return nil, fmt.Errorf("domain %s: %w", uid, api.ErrNotRunning)
	}
	cctx, cancel := context.WithTimeout(ctx, a.cfg.CallTimeout)
	defer cancel()
	d.opMu.Lock()
	defer d.opMu.Unlock()
	rec, err := a.deps.Store.Get(cctx, uid)
	if err != nil {
		return nil, err
	}
	switch {
	case rec.Intent.Reboot != nil:
		return nil, fmt.Errorf("domain %s: %w", uid, api.ErrBusy)
	case rec.Intent.Stop != nil:
		return nil, fmt.Errorf("domain %s is shutting down: %w", uid, api.ErrNotRunning)
	case rec.Intent.Paused:
		return nil, fmt.Errorf("domain %s: %w", uid, api.ErrPaused)
	}
	st, err := mon.QueryStatus(cctx)
	if err != nil {
		return nil, fmt.Errorf("domain %s: query-status: %w", uid, err)
	}
	switch st.Status {
	case qmp.RunStateRunning:
	case qmp.RunStatePaused, qmp.RunStatePrelaunch:
		return nil, fmt.Errorf("domain %s: %w", uid, api.ErrPaused)
	default:
		return nil, fmt.Errorf("domain %s is %s: %w", uid, st.Status, api.ErrNotRunning)
	}
	now := a.now()
	done := d.expectReboot()
	_, err = a.deps.Store.Update(cctx, uid, func(r *store.Record) error {
		r.Intent.Reboot = &store.Reboot{Requested: now, Deadline: now.Add(a.cfg.SoftRebootTimeout)}
		return nil
	}, a.event("SoftRebootRequested", "ACPI power button (no guest agent)"))
	if err != nil {
		d.rebootDone(nil)
		return nil, fmt.Errorf("domain %s: persist reboot intent: %w", uid, err)
	}
	if err := mon.SetShutdownAction(cctx, qmp.ShutdownActionPause); err != nil {
		a.dropReboot(cctx, uid, mon, "set-action failed: "+err.Error())
		d.rebootDone(nil)
		return nil, fmt.Errorf("domain %s: set-action shutdown=pause: %w", uid, err)
	}
	if err := mon.SystemPowerdown(cctx); err != nil {
		a.dropReboot(cctx, uid, mon, "system_powerdown failed: "+err.Error())
		d.rebootDone(nil)
		return nil, fmt.Errorf("domain %s: system_powerdown: %w", uid, err)
	}
	a.log.Info("soft reboot: ACPI power button pressed", "uid", uid, "deadline", now.Add(a.cfg.SoftRebootTimeout))
	return done, nil
}

// dropReboot restores the shutdown action and clears the intent after a
// failed start (best effort: the reconcile retries past the deadline).
func (a *Agent) dropReboot(ctx context.Context, uid string, mon rebootMonitor, why string) {
	if err := mon.SetShutdownAction(ctx, qmp.ShutdownActionPoweroff); err != nil {
		return
	}
	_, _ = a.deps.Store.Update(ctx, uid, func(r *store.Record) error {
		r.Intent.Reboot = nil
		return nil
	}, a.event("SoftRebootFailed", why))
}

// advanceReboot is ActReboot: it resets a guest that shut down, completes
// a reboot that was reset before a crash, or gives up past the deadline.
func (a *Agent) advanceReboot(ctx context.Context, o *Observation) error {
	d := a.domain(o.UID)
	conn := d.qmpConn()
	if conn == nil {
		return nil // not attached: the next sync attaches first
	}
	mon, ok := conn.(rebootMonitor)
	if !ok {
		return fmt.Errorf("QMP connection cannot reset")
	}
	d.opMu.Lock()
	defer d.opMu.Unlock()
	rec, err := a.deps.Store.Get(ctx, o.UID)
	if err != nil {
		return err
	}
	r := rec.Intent.Reboot
	if r == nil {
		return nil // finished meanwhile
	}
	st, err := mon.QueryStatus(ctx)
	if err != nil {
		return err
	}
	switch {
	case o.deleting():
		// The VMI is being stopped: no reboot; the guest's power-off
		// ends QEMU again.
		if err := mon.SetShutdownAction(ctx, qmp.ShutdownActionPoweroff); err != nil {
			return err
		}
		if st.Status == qmp.RunStateShutdown {
			// Already off, held by the reboot's action.
			if err := mon.Quit(ctx); err != nil {
				return err
			}
		}
		return a.endReboot(ctx, o, d, fmt.Errorf("domain %s is being deleted: %w", o.UID, api.ErrNotRunning),
			"SoftRebootAbandoned", "the VMI is being deleted")
	case st.Status == qmp.RunStateShutdown:
		if err := a.setReboot(ctx, o, func(r *store.Reboot) *store.Reboot { r.Resetting = true; return r }); err != nil {
			return err
		}
		// A pause asked for meanwhile holds: the guest is reset but its
		// vCPUs stay stopped until unpause.
		if err := a.resetGuest(ctx, mon, !rec.Intent.Paused); err != nil {
			return err
		}
		if st, err := mon.QueryStatus(ctx); err == nil {
			d.setRunState(st.Status)
		}
		return a.endReboot(ctx, o, d, nil, "SoftRebooted", "the guest shut down on the ACPI power button and was reset")
	case r.Resetting:
		// Reset before a crash; make sure the action is restored.
		if err := mon.SetShutdownAction(ctx, qmp.ShutdownActionPoweroff); err != nil {
			return err
		}
		return a.endReboot(ctx, o, d, nil, "SoftRebooted", "the guest was reset")
	case !a.now().Before(r.Deadline):
		if err := mon.SetShutdownAction(ctx, qmp.ShutdownActionPoweroff); err != nil {
			return err
		}
		msg := fmt.Sprintf("the guest did not shut down within %v of the ACPI power button; soft reboot abandoned, guest shutdown ends the VM again",
			r.Deadline.Sub(r.Requested).Round(time.Second))
		return a.endReboot(ctx, o, d, fmt.Errorf("domain %s: %s: %w", o.UID, msg, api.ErrTimeout), "SoftRebootTimedOut", msg)
	}
	return nil
}

// resetGuest restores the shutdown action, resets the guest that is paused
// in the "shutdown" run state and, with resume, resumes it. The action
// comes first: a crash after it leaves the guest in "shutdown" with the
// intent, which the next sync resets.
func (a *Agent) resetGuest(ctx context.Context, mon rebootMonitor, resume bool) error {
	if err := mon.SetShutdownAction(ctx, qmp.ShutdownActionPoweroff); err != nil {
		return fmt.Errorf("set-action shutdown=poweroff: %w", err)
	}
	if err := mon.SystemReset(ctx); err != nil {
		return fmt.Errorf("system_reset: %w", err)
	}
	// QEMU handles the reset request in its main loop; cont is refused
	// while the run state still says "shutdown".
	for {
		st, err := mon.QueryStatus(ctx)
		if err != nil {
			return err
		}
		if st.Status != qmp.RunStateShutdown {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the reset: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	if !resume {
		return nil
	}
	if err := mon.Cont(ctx); err != nil {
		return fmt.Errorf("cont after reset: %w", err)
	}
	return nil
}

func (a *Agent) setReboot(ctx context.Context, o *Observation, fn func(*store.Reboot) *store.Reboot) error {
	return a.update(ctx, o, func(r *store.Record) error {
		if r.Intent.Reboot != nil {
			r.Intent.Reboot = fn(r.Intent.Reboot)
		}
		return nil
	})
}

// endReboot clears the intent, records reason and wakes the API caller
// waiting for this reboot with result.
func (a *Agent) endReboot(ctx context.Context, o *Observation, d *domain, result error, reason, msg string) error {
	err := a.update(ctx, o, func(r *store.Record) error {
		r.Intent.Reboot = nil
		return nil
	}, a.event(reason, msg))
	if err != nil {
		return err
	}
	if result != nil {
		a.log.Warn("soft reboot abandoned", "vmi", o.name(), "uid", o.UID, "reason", msg)
		a.warn(o.VMI, reason, msg)
	} else {
		a.log.Info("soft reboot done", "vmi", o.name(), "uid", o.UID)
		a.normal(o.VMI, reason, "VirtualMachineInstance soft rebooted")
	}
	d.rebootDone(result)
	return nil
}

// expectReboot registers the waiter of the domain's soft reboot.
func (d *domain) expectReboot() <-chan error {
	ch := make(chan error, 1)
	d.mu.Lock()
	d.rebootWaiter = ch
	d.mu.Unlock()
	return ch
}

// rebootDone hands result to the waiter of the soft reboot, if any.
func (d *domain) rebootDone(result error) {
	d.mu.Lock()
	ch := d.rebootWaiter
	d.rebootWaiter = nil
	d.mu.Unlock()
	if ch != nil {
		ch <- result
	}
}
