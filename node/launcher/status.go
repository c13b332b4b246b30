package launcher

import "time"

// State is the launcher's lifecycle state.
type State string

// Launcher states, in order.
const (
	StateWaiting   State = "waiting"   // no spec yet
	StatePreparing State = "preparing" // preparing disks, starting QEMU
	StateRunning   State = "running"   // QEMU runs
	StateExited    State = "exited"    // QEMU exited (or never started); see Status.Exit
)

// Status is the body of GET /v1/status.
type Status struct {
	State     State      `json:"state"`
	QEMUPid   int        `json:"qemuPid,omitempty"` // in the pod's PID namespace
	SpecHash  string     `json:"specHash,omitempty"`
	StartedAt *time.Time `json:"startedAt,omitempty"`
	Exit      *Exit      `json:"exit,omitempty"`
	// Error says why preparation or start failed (State exited, no QEMU).
	Error string `json:"error,omitempty"`
}

// Exit is how QEMU ended; it is also the content of sockets/qemu-exit.json.
type Exit struct {
	Code   int    `json:"code"`             // exit status; -1 when killed by a signal
	Signal string `json:"signal,omitempty"` // e.g. "killed"
	// GuestShutdown is true when the guest powered itself off (QEMU's
	// SHUTDOWN event with guest=true and reason guest-shutdown) and QEMU
	// then exited with status 0. A crash, a kill, a host-side quit (for
	// example after the grace period) are not guest shutdowns.
	GuestShutdown bool `json:"guestShutdown"`
	// MigratedAway is true when an outgoing live migration completed (the
	// guest runs on another node) and QEMU then exited with status 0.
	MigratedAway bool `json:"migratedAway,omitempty"`
	// Reason is QEMU's last SHUTDOWN reason, if one was seen, or
	// "launch-failed" when QEMU never ran.
	Reason string `json:"reason,omitempty"`
	// Error says why the launch failed (Reason launch-failed): the user
	// sees it in the VMI's condition and events.
	Error string    `json:"error,omitempty"`
	At    time.Time `json:"at"`
}

// Success reports whether the launcher exits 0 for this outcome: the
// guest powered off, or it moved to another node.
func (e Exit) Success() bool { return (e.GuestShutdown || e.MigratedAway) && e.Code == 0 }
