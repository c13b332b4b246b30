package agent

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/node/launcher"
	"github.com/nodevirt/nodevirt/qmp"
	"github.com/nodevirt/nodevirt/store"
)

// Live migration (docs/migration.md): the roles of this node for a VMI and
// the pure plans of each. The record's Migration (store.Migration) is this
// node's side, written before every effect; the VMI's migrationState is
// the controller's and the other agent's.

// Migration actions.
const (
	// ActIncoming persists the target state, makes the target QEMU
	// listen (migrate-incoming) and reports targetNodeAddress and
	// targetNodeDomainReadyTimestamp.
	ActIncoming ActionKind = "MigrationIncoming"
	// ActResumeArrived resumes the arrived guest (targets start with -S,
	// so every guest arrives paused) unless the user paused it, once the
	// source reported the migration completed.
	ActResumeArrived ActionKind = "MigrationResumeArrived"
	// ActTargetDetected reports targetNodeDomainDetected once the target
	// QEMU left inmigrate and runs the guest.
	ActTargetDetected ActionKind = "MigrationTargetDetected"
	// ActMigrateSource starts, follows, cancels and reports the outgoing
	// migration (one step per sync, see migrationsource.go).
	ActMigrateSource ActionKind = "MigrationSource"
)

// Roles in store.Migration.Role.
const (
	roleSource = "source"
	roleTarget = "target"
)

// States in store.Migration.State. Source: Starting → [Mirroring →]
// Migrating → Completed | Failed (Mirroring: node-local disks are copied
// first; Aborting before a cancel the controller asked for).
// Target: Preparing → Listening → Ready → Detected.
const (
	migStarting  = "Starting"
	migMirroring = "Mirroring"
	migMigrating = "Migrating"
	migAborting  = "Aborting"
	migCompleted = "Completed"
	migFailed    = "Failed"

	migPreparing = "Preparing"
	migListening = "Listening"
	migReady     = "Ready"
	migDetected  = "Detected"
)

// pollMigration is how often a running migration is looked at besides its
// MIGRATION events (timeouts, abort requests).
const pollMigration = 250 * time.Millisecond

// owner reports whether this node runs the VMI: label kubevirt.io/nodeName,
// or taken over before the controller labelled it (prelaunch.go).
func (o *Observation) owner() bool {
	return o.VMI != nil && (o.VMI.Labels[v1.NodeNameLabel] == o.Node || takenOver(o.VMI, o.Node))
}

// incoming is the VMI's migration state when this node is its target and
// not (yet) its owner: the VMI carries the target label and
// migrationState names this node.
func (o *Observation) incoming() *v1.VirtualMachineInstanceMigrationState {
	if o.VMI == nil || o.owner() || o.VMI.Labels[v1.MigrationTargetNodeNameLabel] != o.Node {
		return nil
	}
	ms := o.VMI.Status.MigrationState
	if ms == nil || ms.MigrationUID == "" || ms.TargetNode != o.Node {
		return nil
	}
	return ms
}

// outgoing is the VMI's migration state when this node owns the VMI and
// is the migration's source.
func (o *Observation) outgoing() *v1.VirtualMachineInstanceMigrationState {
	if !o.owner() {
		return nil
	}
	ms := o.VMI.Status.MigrationState
	if ms == nil || ms.MigrationUID == "" || ms.SourceNode != o.Node || ms.TargetNode == o.Node {
		return nil
	}
	return ms
}

// handoffRefused reports an outgoing migration that completed here (the
// guest's state left this QEMU, now in postmigrate) and that the
// controller ended without handing the VMI over: the VMI is still this
// node's and no longer carries the target label of that migration (the
// target was lost before it reported the guest running). The target may
// have run the guest, so this QEMU must not resume it: the guest is lost
// and the VMI fails, as KubeVirt's does.
func (o *Observation) handoffRefused() bool {
	if !o.liveRecord() || !o.owner() {
		return false
	}
	m := o.Record.Migration
	if m == nil || m.Role != roleSource || m.State != migCompleted {
		return false
	}
	ms := o.VMI.Status.MigrationState
	pending := ms != nil && string(ms.MigrationUID) == m.UID && ms.TargetNode != "" &&
		o.VMI.Labels[v1.MigrationTargetNodeNameLabel] == ms.TargetNode
	return !pending
}

// recordMigration is the record's migration when it is uid in role.
func (o *Observation) recordMigration(uid, role string) *store.Migration {
	if o.Record == nil || o.Record.Migration == nil {
		return nil
	}
	m := o.Record.Migration
	if m.UID != uid || m.Role != role {
		return nil
	}
	return m
}

// incomingTarget reports whether the live record is a target that has
// not been handed the VMI yet: QEMU is launched with -incoming defer, and
// nothing but the target's migrationState fields is reported.
func (o *Observation) incomingTarget() bool {
	return o.liveRecord() && !o.owner() && o.Record.Migration != nil && o.Record.Migration.Role == roleTarget
}

// planTarget prepares, serves and reports this node's side of an incoming
// migration; when the migration is over without a handoff it quits the
// target QEMU and releases everything, never touching the VMI's phase.
func planTarget(o *Observation) Plan {
	ms := o.incoming()
	active := ms != nil && !ms.Failed && !abortBeforeStart(ms) && o.VMI.DeletionTimestamp == nil &&
		o.VMI.Status.Phase == v1.Running
	var uid string
	if ms != nil {
		uid = string(ms.MigrationUID)
	}
	if o.Record != nil && o.Record.Migration != nil && o.Record.Migration.UID != uid && o.liveRecord() {
		active = false // a previous migration's target: tear it down first
	}
	if !active {
		return planOrphan(o)
	}
	if o.Record != nil && o.Record.IsGone() && o.recordMigration(uid, roleTarget) != nil {
		return Plan{} // this migration's target already ended here
	}
	if o.Pod == nil {
		return Plan{Requeue: pollStopping} // the pod informer may lag
	}
	if !o.liveRecord() {
		return planNewRecord(o)
	}
	m := o.Record.Migration
	switch o.Launcher.State {
	case launcher.StateWaiting:
		return planStart(o)
	case launcher.StatePreparing, LauncherUnreachable:
		if o.Launcher.State == LauncherUnreachable && o.Record.Process.PID != 0 && !o.Runtime.QEMUAlive {
			return planOrphan(o) // the target QEMU is gone: the incoming migration failed
		}
		return Plan{Requeue: o.startingPoll()}
	case launcher.StateRunning:
		var p Plan
		if o.wantsNetwork() && !o.Runtime.NetworkReady {
			p.Actions = append(p.Actions, ActEnsureNetwork)
		}
		if !o.Runtime.QMPConnected {
			p.Actions = append(p.Actions, ActAttach)
		}
		switch {
		case m.State == migPreparing || m.State == migListening || !targetReadyReported(ms, m.Address):
			p.Actions = append(p.Actions, ActIncoming)
		case o.Runtime.RunState != "" && o.Runtime.RunState != qmp.RunStateInMigrate && !ms.TargetNodeDomainDetected:
			if o.Runtime.RunState == qmp.RunStatePaused && !o.Record.Intent.Paused {
				// The state arrived, but only the source knows whether
				// the migration completed: a source whose switch-over
				// failed or was cancelled resumes the guest there. The
				// guest runs here once the source said completed, and
				// is reported detected only then, so the controller
				// never hands over a guest that stands still.
				if !ms.Completed {
					break
				}
				p.Actions = append(p.Actions, ActResumeArrived)
			}
			p.Actions = append(p.Actions, ActTargetDetected)
		}
		if len(p.Actions) == 0 {
			p.Requeue = pollStopping
		}
		return p
	default: // LauncherExited: the incoming migration failed, QEMU exited
		return planOrphan(o)
	}
}

// abortBeforeStart reports an abort request for a migration the source has
// not started: nothing will arrive, the target goes. Once the transfer
// started the target keeps serving until the source reports the outcome:
// quitting first would break the stream under the source's cancel and turn
// an abort into a failed transfer.
func abortBeforeStart(ms *v1.VirtualMachineInstanceMigrationState) bool {
	return ms.AbortRequested && ms.StartTimestamp == nil
}

// targetReadyReported reports whether the target's address and ready time
// are in the VMI's migrationState.
func targetReadyReported(ms *v1.VirtualMachineInstanceMigrationState, addr string) bool {
	return ms.TargetNodeAddress == addr && addr != "" && ms.TargetNodeDomainReadyTimestamp != nil
}

// sourcePlan adds the outgoing migration's step to p, the plan of the
// running VMI. Once the migration completed, QEMU is in postmigrate, which
// is not the guest's state: the source then only reports its
// migrationState fields (no status patch, no pause re-applied).
func sourcePlan(o *Observation, p Plan) Plan {
	if o.handoffRefused() {
		// Nothing may touch the postmigrate QEMU (no new migration, no
		// pause): the status goes Failed, then planFinished quits it.
		return Plan{PatchStatus: true}
	}
	ms := o.outgoing()
	if ms == nil || !o.liveRecord() {
		return p
	}
	m := o.recordMigration(string(ms.MigrationUID), roleSource)
	switch {
	case m == nil:
		if ms.Completed || ms.Failed || ms.AbortRequested || ms.TargetNodeAddress == "" ||
			ms.TargetNodeDomainReadyTimestamp == nil {
			return p
		}
		if o.Record.Intent.Freeze != nil {
			// A frozen guest does not leave: the target would not know
			// to thaw it. The migration starts after the thaw.
			if p.Requeue == 0 || p.Requeue > pollMigration {
				p.Requeue = pollMigration
			}
			return p
		}
		p.Actions = append(p.Actions, ActMigrateSource)
		p.Requeue = pollMigration
	case m.State == migCompleted:
		var q Plan
		if !sourceReported(ms, sourceFields(m, ms.AbortRequested)) {
			q.Actions = []ActionKind{ActMigrateSource}
		}
		return q
	case m.State == migFailed:
		if m.StoppedGuest || !sourceReported(ms, sourceFields(m, ms.AbortRequested)) {
			p.Actions = append(p.Actions, ActMigrateSource)
		}
	default:
		p.Actions = append(p.Actions, ActMigrateSource)
		p.Requeue = pollMigration
	}
	return p
}

// sourceFields are the migrationState fields the source agent owns, as
// its record says (the whole set: a server-side apply drops the fields of
// its manager it leaves out).
func sourceFields(m *store.Migration, abortRequested bool) v1.VirtualMachineInstanceMigrationState {
	var s v1.VirtualMachineInstanceMigrationState
	if !m.Started.IsZero() {
		t := metav1.NewTime(m.Started)
		s.StartTimestamp = &t
		s.Mode = migrationMode(m)
	}
	if !m.Ended.IsZero() {
		t := metav1.NewTime(m.Ended)
		s.EndTimestamp = &t
	}
	s.Completed, s.Failed = m.Completed, m.Failed
	if m.Failed {
		s.FailureReason = m.Reason
	}
	switch {
	case m.Failed && m.Aborted:
		s.AbortStatus = v1.MigrationAbortSucceeded
	case m.Completed && abortRequested:
		s.AbortStatus = v1.MigrationAbortFailed
	case abortRequested && m.State == migAborting:
		s.AbortStatus = v1.MigrationAbortInProgress
	}
	return s
}

// sourceReported reports whether the VMI's migrationState carries want's
// fields.
func sourceReported(ms *v1.VirtualMachineInstanceMigrationState, want v1.VirtualMachineInstanceMigrationState) bool {
	sameTime := func(a, b *metav1.Time) bool {
		return (a == nil) == (b == nil) && (a == nil || a.Time.Unix() == b.Time.Unix())
	}
	return sameTime(ms.StartTimestamp, want.StartTimestamp) && sameTime(ms.EndTimestamp, want.EndTimestamp) &&
		ms.Completed == want.Completed && ms.Failed == want.Failed && ms.FailureReason == want.FailureReason &&
		ms.AbortStatus == want.AbortStatus && ms.Mode == want.Mode
}
