package agent

import (
	"time"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/node/launcher"
	"github.com/nodevirt/nodevirt/store"
)

// ActionKind names one idempotent step of a sync.
type ActionKind string

// The actions apply knows. Each is idempotent: applying it twice, or after a
// crash half-way through, converges to the same state.
const (
	// ActRefuse warns on a VMI new to the node that the node takes no new
	// VMIs (Observation.Refusing); it stays Scheduled and is retried.
	ActRefuse ActionKind = "Refuse"
	// ActCreateRecord persists the VMI's record (pod UID, sockets) before
	// anything is built for it.
	ActCreateRecord ActionKind = "CreateRecord"
	// ActAllocateNetwork persists tap names, MACs and guest addresses in the
	// record, before any link is created.
	ActAllocateNetwork ActionKind = "AllocateNetwork"
	// ActEnsureNetwork builds the network in the pod netns and (re)starts
	// the DHCP servers.
	ActEnsureNetwork ActionKind = "EnsureNetwork"
	// ActWriteCloudInit writes the NoCloud ISO into the pod's private dir.
	ActWriteCloudInit ActionKind = "WriteCloudInit"
	// ActLaunch hands the launch spec to the launcher.
	ActLaunch ActionKind = "Launch"
	// ActAttach connects to QEMU's QMP socket (and the guest agent) and
	// records the QEMU process.
	ActAttach ActionKind = "Attach"
	// ActPowerdown persists the stop intent, then presses the ACPI power
	// button.
	ActPowerdown ActionKind = "Powerdown"
	// ActQuit stops QEMU regardless of the guest (QMP quit, then SIGKILL).
	ActQuit ActionKind = "Quit"
	// ActRelease closes connections, stops DHCP and removes the network.
	ActRelease ActionKind = "Release"
	// ActMarkGone turns the record into a tombstone.
	ActMarkGone ActionKind = "MarkGone"
	// ActRemoveFinalizer lets the API server delete the VMI.
	ActRemoveFinalizer ActionKind = "RemoveFinalizer"
)

// Plan is what one sync does: actions in order, then (maybe) a status
// patch, and when to look again if nothing else triggers a sync.
type Plan struct {
	Actions []ActionKind
	// PatchStatus: derive and patch the VMI status after the actions.
	PatchStatus bool
	// Requeue, when > 0, asks for another sync after this long.
	Requeue time.Duration
	// Again asks sync to observe and plan again right away: the actions
	// only wrote the store, and the next step needs no outside change.
	Again bool
}

// Poll intervals for states that have no event to wake the agent.
const (
	pollStarting = 100 * time.Millisecond // launcher not up yet, QEMU starting
	// pollWatched replaces pollStarting while the pod's sockets directory
	// is watched (Observation.PodWatched), from before the kubelet made
	// it: the directory's creation, the launcher's socket and QEMU's
	// running and exit files wake the agent, the poll is only the safety
	// net.
	pollWatched = time.Second
	// pollAwaitSocket replaces pollWatched while the watched directory
	// has no launcher socket yet (LauncherView.NoSocket): the pod's
	// containers are still being started, which under a burst takes tens
	// of seconds, and the socket's creation is an event the watcher
	// never loses (HostPodWatcher), so a 1 s poll would only cost the
	// node a sync a second per starting pod.
	pollAwaitSocket = 10 * time.Second
	pollStopping    = time.Second     // waiting for a guest to power off
	pollRefused     = 5 * time.Second // the node takes no new VMIs (store full)
)

// startingPoll is when to look again at a launcher that is not up yet or
// a QEMU that is starting.
func (o *Observation) startingPoll() time.Duration {
	switch {
	case o.PodWatched && o.Launcher.NoSocket && (o.Record == nil || o.Record.Process.PID == 0):
		// No QEMU was started here: only the launcher's start is awaited.
		return pollAwaitSocket
	case o.PodWatched:
		return pollWatched
	}
	return pollStarting
}

// plan decides what to do for o. It is pure.
func plan(o *Observation) Plan {
	switch {
	case awaitingLauncher(o):
		return Plan{Requeue: o.startingPoll()} // prelaunch.go
	case o.VMI == nil:
		return planOrphan(o)
	case prelaunching(o):
		return planPrelaunch(o)
	case !o.owner():
		// In the cache through the migration target label only.
		return planTarget(o)
	case !o.VMI.Status.Phase.OwnedByAgent():
		return Plan{} // the controller's; it labels the VMI before Scheduled
	case o.deleting():
		return planDelete(o)
	case o.VMI.Status.Phase.IsFinal():
		return planFinished(o)
	default:
		return planRun(o)
	}
}

// planOrphan handles a record whose VMI is gone from the API (deleted
// without our finalizer, or moved off this node).
func planOrphan(o *Observation) Plan {
	if !o.liveRecord() {
		return Plan{}
	}
	if o.qemuRunning() {
		return Plan{Actions: []ActionKind{ActQuit}, Requeue: pollStopping}
	}
	return Plan{Actions: []ActionKind{ActRelease, ActMarkGone}}
}

// planDelete shuts a deleted VMI's guest down within its grace period.
func planDelete(o *Observation) Plan {
	if o.qemuRunning() && o.Launcher.Exit == nil {
		var stop *store.Stop
		if o.Record != nil {
			stop = o.Record.Intent.Stop
		}
		if o.liveRecord() && o.Record.Intent.Reboot != nil && o.Runtime.QMPConnected {
			// Give up a soft reboot first: with its shutdown action
			// QEMU would not exit on the power-off.
			return Plan{Actions: []ActionKind{ActReboot}, Again: true}
		}
		switch {
		case stop == nil && thawBeforeStop(o):
			return Plan{Actions: []ActionKind{ActThaw, ActPowerdown}, PatchStatus: true, Requeue: pollStopping}
		case stop == nil:
			return Plan{Actions: []ActionKind{ActPowerdown}, PatchStatus: true, Requeue: pollStopping}
		case !o.Now.Before(stop.Deadline):
			return Plan{Actions: []ActionKind{ActQuit}, PatchStatus: true, Requeue: pollStopping}
		default:
			return Plan{PatchStatus: true, Requeue: min(pollStopping, stop.Deadline.Sub(o.Now))}
		}
	}
	var p Plan
	if o.liveRecord() {
		p.Actions = append(p.Actions, ActRelease, ActMarkGone)
	}
	if o.hasFinalizer() {
		p.Actions = append(p.Actions, ActRemoveFinalizer)
	}
	p.PatchStatus = true
	return p
}

// planFinished releases what a VMI in a final phase still holds.
func planFinished(o *Observation) Plan {
	if o.qemuRunning() && o.Launcher.Exit == nil {
		// Failed by the controller (node unresponsive) while QEMU runs:
		// the VMI is over, so is its QEMU.
		return Plan{Actions: []ActionKind{ActQuit}, Requeue: pollStopping}
	}
	if o.liveRecord() && o.Record.Observed.Finished.IsZero() {
		return Plan{Actions: []ActionKind{ActRelease}}
	}
	return Plan{}
}

// planNewRecord takes a VMI new to this node: its record first, unless
// the node takes no new VMIs (its store is full), which the VMI is told
// until it does.
func planNewRecord(o *Observation) Plan {
	if o.Refusing != "" {
		return Plan{Actions: []ActionKind{ActRefuse}, Requeue: pollRefused}
	}
	return Plan{Actions: []ActionKind{ActCreateRecord}, Again: true}
}

// planRun brings a Scheduled or Running VMI to a running QEMU.
func planRun(o *Observation) Plan {
	if o.Pod == nil {
		switch {
		case o.VMI.Status.Phase == v1.Scheduled && !o.liveRecord():
			return Plan{Requeue: pollStopping} // the pod informer may lag
		case o.qemuRunning() && o.Launcher.Exit == nil:
			// The pod is being torn down: its launcher stops QEMU.
			return Plan{PatchStatus: true, Requeue: pollStopping}
		}
		return Plan{Actions: releaseIfLive(o), PatchStatus: true}
	}
	if !o.liveRecord() {
		return planNewRecord(o)
	}
	switch o.Launcher.State {
	case LauncherUnreachable:
		if o.Record.Process.PID != 0 && !o.Runtime.QEMUAlive {
			// It ran and is gone, with its launcher: lost.
			return Plan{Actions: releaseIfLive(o), PatchStatus: true}
		}
		return Plan{Requeue: o.startingPoll()}
	case launcher.StateWaiting:
		return planStart(o)
	case launcher.StatePreparing:
		return Plan{Requeue: o.startingPoll()}
	case launcher.StateRunning:
		if o.Record.Process.PID != 0 && !o.Runtime.QEMUAlive && !o.Runtime.QMPConnected {
			// QEMU died; its launcher reports the exit in a moment.
			return Plan{Requeue: o.startingPoll()}
		}
		var p Plan
		if o.wantsNetwork() && !o.Runtime.NetworkReady {
			p.Actions = append(p.Actions, ActEnsureNetwork)
		}
		if !o.Runtime.QMPConnected {
			p.Actions = append(p.Actions, ActAttach)
		}
		if needsPause(o) {
			p.Actions = append(p.Actions, ActPause)
		}
		if act, requeue := rebootPlan(o); act {
			p.Actions = append(p.Actions, ActReboot)
		} else if requeue > 0 {
			p.Requeue = requeue
		}
		p.PatchStatus = true
		return sourcePlan(o, withThaw(o, p))
	default: // LauncherExited
		return Plan{Actions: releaseIfLive(o), PatchStatus: true}
	}
}

// planStart prepares everything QEMU needs and launches it.
func planStart(o *Observation) Plan {
	var p Plan
	if o.wantsNetwork() {
		if len(o.Record.Interfaces) == 0 {
			p.Actions = append(p.Actions, ActAllocateNetwork)
		}
		if !o.Runtime.NetworkReady {
			p.Actions = append(p.Actions, ActEnsureNetwork)
		}
	}
	if o.NeedsCloudInit {
		p.Actions = append(p.Actions, ActWriteCloudInit)
	}
	p.Actions = append(p.Actions, ActLaunch)
	p.Requeue = o.startingPoll()
	return p
}

func releaseIfLive(o *Observation) []ActionKind {
	if o.liveRecord() && o.Record.Observed.Finished.IsZero() {
		return []ActionKind{ActRelease}
	}
	return nil
}
