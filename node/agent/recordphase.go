package agent

import (
	"context"
	"time"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/store"
)

// The record's observed phase follows the VMI's agent-owned phase on every
// sync (level-triggered), not only in the sync that patched it: a status
// patch whose answer was lost, an agent killed between the patch and the
// store write, or a record marked gone before the final status was patched
// (deletion) would otherwise leave the record on an old phase forever,
// since later syncs find nothing to patch. A stale cache cannot move the
// record back: only the transitions of v1's phase table are taken.

// recordPhase makes phase (agent-owned, as patched or as read from the
// API) the record's observed phase, tombstones included, when it differs.
func (a *Agent) recordPhase(ctx context.Context, o *Observation, phase v1.VirtualMachineInstancePhase, reason string, at time.Time) error {
	if o.Record == nil || !phase.OwnedByAgent() {
		return nil
	}
	cur := v1.VirtualMachineInstancePhase(o.Record.Observed.Phase)
	if cur == phase || (cur != v1.VmPhaseUnset && !cur.CanTransitionTo(phase)) {
		return nil
	}
	return a.update(ctx, o, func(r *store.Record) error {
		r.Observed.Phase = string(phase)
		r.Observed.Reason = reason
		r.Observed.At = at
		r.Observed.Transitions = append(r.Observed.Transitions, store.Transition{Phase: string(phase), At: at})
		return nil
	}, a.event("Phase"+string(phase), reason))
}

// recordAPIPhase records the phase the VMI has in the cache, at the time
// the VMI entered it (the agent's clock when the status does not say).
func (a *Agent) recordAPIPhase(ctx context.Context, o *Observation) error {
	if o.VMI == nil {
		return nil
	}
	phase, at := o.VMI.Status.Phase, o.Now
	for _, t := range o.VMI.Status.PhaseTransitionTimestamps {
		if t.Phase == phase && !t.PhaseTransitionTimestamp.IsZero() {
			at = t.PhaseTransitionTimestamp.Time
		}
	}
	return a.recordPhase(ctx, o, phase, "", at)
}
