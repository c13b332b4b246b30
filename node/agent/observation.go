package agent

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/node/launcher"
	"github.com/nodevirt/nodevirt/store"
)

// LauncherUnreachable is the agent's own launcher state: no answer on
// launcher.sock (not up yet, or gone).
const LauncherUnreachable launcher.State = ""

// LauncherView is what the agent saw of the launcher in one sync.
type LauncherView struct {
	State    launcher.State
	SpecHash string
	// Exit is set once QEMU has exited: from the launcher's status, or
	// from qemu-exit.json when the launcher itself is gone.
	Exit *launcher.Exit
	// Error is the launcher's reason for an exit without QEMU.
	Error string
	// NoSocket: the launcher did not answer and its socket is not in the
	// pod's sockets directory (the launcher has not started yet); the
	// socket's creation is the event that ends the wait.
	NoSocket bool
}

// RuntimeView is the agent's in-memory view of a domain: connections it
// holds in this process. It is empty after an agent restart until the
// domain is re-attached.
type RuntimeView struct {
	QMPConnected   bool
	RunState       string // QMP run state, e.g. "running", "paused", "shutdown"
	NetworkReady   bool   // netsetup.Ensure done and DHCP served in this process
	AgentConnected bool
	// AgentProbed: the guest agent was probed at least once since attach;
	// until then AgentConnected means nothing and the status keeps its value.
	AgentProbed bool
	// QEMUAlive reports whether the recorded QEMU process (pid and start
	// time) still exists on the host.
	QEMUAlive bool
}

// Observation is everything sync knows about one VMI UID before it plans.
// It is plain data so plan and status derivation are pure functions of it.
type Observation struct {
	UID string
	// Node is this agent's node name.
	Node string
	// VMI is nil when the VMI is gone from the API (or not on this node).
	VMI *v1.VirtualMachineInstance
	// Pod is the VMI's launcher pod on this node, nil if none is known.
	Pod *corev1.Pod
	// Record is the store record, nil when there is none.
	Record   *store.Record
	Launcher LauncherView
	Runtime  RuntimeView
	// NeedsCloudInit: the VMI has a cloudInitNoCloud volume whose ISO is
	// not written yet.
	NeedsCloudInit bool
	// PodWatched: the pod's sockets directory is watched (Deps.Pods), or
	// waited for while the kubelet has not made it, so the directory
	// appearing, the launcher coming up and QEMU running or exiting wake
	// a sync.
	PodWatched bool
	// Refusing is why the node takes no new VMIs (Deps.Guard), "" when it
	// does: a VMI without a record gets none.
	Refusing string
	Now      time.Time
}

// deleting reports whether the VMI is being deleted.
func (o *Observation) deleting() bool {
	return o.VMI != nil && o.VMI.DeletionTimestamp != nil
}

// hasFinalizer reports whether the VMI still carries the agent's finalizer.
func (o *Observation) hasFinalizer() bool {
	if o.VMI == nil {
		return false
	}
	for _, f := range o.VMI.Finalizers {
		if f == v1.VirtualMachineInstanceFinalizer {
			return true
		}
	}
	return false
}

// qemuRunning reports whether QEMU is (or may be) running for the VMI: the
// launcher says so, or a recorded QEMU process is alive.
func (o *Observation) qemuRunning() bool {
	switch o.Launcher.State {
	case launcher.StatePreparing, launcher.StateRunning:
		return true
	case launcher.StateExited:
		return false
	}
	return o.Runtime.QEMUAlive || o.Runtime.QMPConnected
}

// liveRecord reports whether a non-tombstone record exists.
func (o *Observation) liveRecord() bool { return o.Record != nil && !o.Record.IsGone() }

// wantsNetwork reports whether the VMI has pod-network interfaces.
func (o *Observation) wantsNetwork() bool {
	return o.VMI != nil && len(podInterfaces(o.VMI)) > 0
}
