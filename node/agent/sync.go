package agent

import (
	"context"
	"fmt"
	"time"
)

// launcherStatusTimeout bounds one launcher status call: a launcher that
// does not answer this fast is treated as unreachable for this sync.
const launcherStatusTimeout = 2 * time.Second

// sync reconciles the VMI uid: observe, plan (pure), apply the actions in
// order, report the status, and remove the finalizer last so the final
// status is visible before the VMI goes away.
func (a *Agent) sync(ctx context.Context, uid string) error {
	defer a.ready.synced(uid)
	for range maxRounds {
		again, err := a.syncOnce(ctx, uid)
		if err != nil || !again {
			return err
		}
	}
	a.enqueue(uid)
	return nil
}

// maxRounds bounds the observe-plan-apply rounds of one sync.
const maxRounds = 3

// syncOnce is one round of sync; again reports that the plan asked for
// another round right away.
func (a *Agent) syncOnce(ctx context.Context, uid string) (again bool, err error) {
	o, err := a.observe(ctx, uid)
	if err != nil {
		return false, fmt.Errorf("observe VMI %s: %w", uid, err)
	}
	p := plan(o)
	a.log.Debug("sync", "uid", uid, "vmi", o.name(), "launcher", o.Launcher.State,
		"qmp", o.Runtime.QMPConnected, "pod", o.Pod != nil, "record", o.Record != nil,
		"actions", p.Actions, "requeue", p.Requeue)
	removeFinalizer := false
	for _, act := range p.Actions {
		if act == ActRemoveFinalizer {
			removeFinalizer = true
			continue
		}
		if err := a.apply(ctx, act, o); err != nil {
			return false, fmt.Errorf("VMI %s: %s: %w", o.name(), act, err)
		}
	}
	if p.PatchStatus && o.VMI != nil {
		o.Runtime = a.refreshRuntime(o)
		if err := a.report(ctx, o); err != nil {
			return false, fmt.Errorf("VMI %s: report status: %w", o.name(), err)
		}
	} else if err := a.recordAPIPhase(ctx, o); err != nil {
		return false, fmt.Errorf("VMI %s: record phase: %w", o.name(), err)
	}
	if removeFinalizer {
		if err := a.removeFinalizer(ctx, o); err != nil {
			return false, fmt.Errorf("VMI %s: %s: %w", o.name(), ActRemoveFinalizer, err)
		}
	}
	if p.Requeue > 0 {
		a.loop.EnqueueAfter(uid, p.Requeue)
	}
	return p.Again, nil
}

// refreshRuntime re-reads the in-memory view after the actions ran.
func (a *Agent) refreshRuntime(o *Observation) RuntimeView {
	v := a.runtimeView(o.UID)
	v.QEMUAlive = o.Runtime.QEMUAlive
	if o.Record != nil && v.QMPConnected {
		v.QEMUAlive = a.deps.Processes.Alive(o.Record.Process)
	}
	return v
}

// name is namespace/name of the VMI, or its UID when it is gone.
func (o *Observation) name() string {
	switch {
	case o.VMI != nil:
		return o.VMI.Namespace + "/" + o.VMI.Name
	case o.Record != nil && o.Record.Name != "":
		return o.Record.Namespace + "/" + o.Record.Name
	}
	return o.UID
}
