package store

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"time"
)

// recordVersion is the encoding version of Record written by this package.
// Bump it (and teach decodeRecord the old shape) when a field changes meaning;
// adding a field does not need a bump, since JSON ignores unknown fields and
// leaves missing ones zero.
const recordVersion = 1

// Record is everything the agent remembers about one VMI on this node. It is
// keyed by the VMI's UID, which never changes.
//
// Strings such as phases and run states are the agent's vocabulary; the store
// keeps them verbatim and attaches no meaning to them.
type Record struct {
	// Version is the record encoding version. The store sets it on every
	// write; callers only read it.
	Version int `json:"version"`

	UID       string `json:"uid"`
	Namespace string `json:"namespace,omitzero"`
	Name      string `json:"name,omitzero"`
	PodUID    string `json:"podUID,omitzero"`

	// Spec is the launch spec handed to the launcher, opaque JSON owned by the
	// agent. The store keeps it verbatim (compacted).
	Spec json.RawMessage `json:"spec,omitempty"`

	Process    Process     `json:"process,omitzero"`
	Sockets    Sockets     `json:"sockets,omitzero"`
	Interfaces []Interface `json:"interfaces,omitempty"`
	Intent     Intent      `json:"intent,omitzero"`
	// IntentSeq is the sequence number of the newest intent log entry
	// this record reflects (SetPaused, intentlog.go); the store sets it.
	IntentSeq uint64     `json:"intentSeq,omitzero"`
	Observed  Observed   `json:"observed,omitzero"`
	Migration *Migration `json:"migration,omitempty"`

	// Gone is when the VMI was marked gone (MarkGone). A record with a
	// non-zero Gone is a tombstone: kept for the retention period so nodectl
	// can explain what happened, then removed by Prune.
	Gone time.Time `json:"gone,omitzero"`
}

// IsGone reports whether the record is a tombstone.
func (r *Record) IsGone() bool { return !r.Gone.IsZero() }

// Process identifies the QEMU process of a VMI. A pid alone is not an
// identity: pids are reused. The agent re-attaches only to a process whose
// start time (and boot) match.
type Process struct {
	PID int `json:"pid,omitzero"`
	// StartTime is field 22 of /proc/<pid>/stat: clock ticks after boot.
	StartTime uint64 `json:"startTime,omitzero"`
	// BootID is /proc/sys/kernel/random/boot_id when the process was seen;
	// a different boot means the process is gone whatever its pid.
	BootID string `json:"bootID,omitzero"`
}

// Sockets are the unix socket paths of a VMI, as seen from the host.
type Sockets struct {
	Dir        string `json:"dir,omitzero"`        // the pod's sockets emptyDir
	Launcher   string `json:"launcher,omitzero"`   // launcher control socket
	QMP        string `json:"qmp,omitzero"`        // QEMU monitor
	GuestAgent string `json:"guestAgent,omitzero"` // qemu-ga virtio-serial chardev
	Serial     string `json:"serial,omitzero"`     // serial console
	VNC        string `json:"vnc,omitzero"`        // VNC display
}

// Interface is the network allocation of one VMI interface.
type Interface struct {
	Name    string         `json:"name"`             // spec.domain.devices.interfaces[].name
	Binding string         `json:"binding,omitzero"` // "masquerade", "bridge"
	Tap     string         `json:"tap,omitzero"`     // tap device in the pod netns
	Bridge  string         `json:"bridge,omitzero"`  // bridge in the pod netns
	MAC     string         `json:"mac,omitzero"`     // guest MAC address
	IPs     []netip.Prefix `json:"ips,omitempty"`    // addresses handed to the guest
	Gateway netip.Addr     `json:"gateway,omitzero"` // router handed to the guest
	PodIPs  []netip.Prefix `json:"podIPs,omitempty"` // the pod's own addresses
}

// Intent is what was asked of the VMI, by the user or by the agent's own
// decisions. It is written before the agent acts on it, so that after a
// crash the agent resumes the same decision instead of guessing.
type Intent struct {
	// Paused means the VMI is paused by the user (pause subresource or
	// startStrategy Paused) and must stay paused until unpaused.
	Paused bool `json:"paused,omitzero"`
	// Stop, when set, means the VMI is being shut down.
	Stop *Stop `json:"stop,omitempty"`
	// Reboot, when set, means a soft reboot through the ACPI power button
	// is under way: QEMU's shutdown action is (or is about to be) "pause",
	// and the guest's next shutdown is to be turned into a reset.
	Reboot *Reboot `json:"reboot,omitempty"`
	// Freeze, when set, means the guest's filesystems are (or are about
	// to be, or may still be) frozen through its guest agent, and must be
	// thawed by Freeze.Deadline at the latest. It is written before the
	// freeze and cleared only after a successful thaw, so a guest is never
	// left frozen by a crash or a failed step.
	Freeze *Freeze `json:"freeze,omitempty"`
}

// Freeze is a guest filesystem freeze (guest-fsfreeze-freeze) with its
// automatic thaw.
type Freeze struct {
	Requested time.Time `json:"requested"`
	// Deadline is when the agent thaws the guest whatever happens; a
	// renewed freeze moves it, an unfreeze or a failed freeze brings it
	// to now.
	Deadline time.Time `json:"deadline"`
}

// Reboot is a soft reboot without a guest agent ("fake reboot"): the
// power button is pressed with QEMU set to pause instead of exiting on the
// guest's shutdown; the agent then resets and resumes the guest and
// restores the shutdown action.
type Reboot struct {
	Requested time.Time `json:"requested"`
	// Deadline is when the agent gives up waiting for the guest to shut
	// down and restores the shutdown action.
	Deadline time.Time `json:"deadline"`
	// Resetting is set right before the reset: the guest did shut down,
	// so a reboot intent found with a running guest is complete.
	Resetting bool `json:"resetting,omitzero"`
}

// Stop is a requested shutdown.
type Stop struct {
	Requested time.Time `json:"requested"`
	// Deadline is when the grace period ends and QEMU is quit regardless.
	Deadline time.Time `json:"deadline,omitzero"`
	Reason   string    `json:"reason,omitzero"`
}

// Observed is the last state the agent observed and reported.
type Observed struct {
	Phase    string    `json:"phase,omitzero"`    // VMI phase, e.g. "Running"
	RunState string    `json:"runState,omitzero"` // QMP query-status, e.g. "paused"
	Reason   string    `json:"reason,omitzero"`
	At       time.Time `json:"at,omitzero"` // when this was observed
	Started  time.Time `json:"started,omitzero"`
	Finished time.Time `json:"finished,omitzero"`
	// Transitions lists phase changes, oldest first.
	Transitions []Transition `json:"transitions,omitempty"`
}

// Transition is one phase change.
type Transition struct {
	Phase string    `json:"phase"`
	At    time.Time `json:"at"`
}

// Migration is this node's side of a live migration.
type Migration struct {
	UID        string    `json:"uid"`            // the VirtualMachineInstanceMigration's UID
	Role       string    `json:"role"`           // "source" or "target"
	State      string    `json:"state,omitzero"` // agent-defined progress
	SourceNode string    `json:"sourceNode,omitzero"`
	TargetNode string    `json:"targetNode,omitzero"`
	Address    string    `json:"address,omitzero"` // target's listen address
	Started    time.Time `json:"started,omitzero"`
	Ended      time.Time `json:"ended,omitzero"`
	Completed  bool      `json:"completed,omitzero"`
	Failed     bool      `json:"failed,omitzero"`
	Reason     string    `json:"reason,omitzero"`
	// Aborted: the agent cancelled the migration because it was asked to
	// (the VMIM was deleted), written before the cancel.
	Aborted bool `json:"aborted,omitzero"`
	// Mode is an outgoing migration's migrationState.mode: PreCopy, or
	// Paused when the guest's vCPUs are stopped for the whole transfer.
	Mode string `json:"mode,omitzero"`
	// StoppedGuest: the source agent stopped the running guest for a
	// Paused transfer and has not resumed it yet (written before the
	// stop, cleared after the resume that follows a failed migration).
	StoppedGuest bool `json:"stoppedGuest,omitzero"`
	// DowntimeMs and TotalMs are the figures of a completed outgoing
	// migration: QEMU's query-migrate downtime (for a Paused transfer the
	// whole transfer, the guest being stopped throughout) and total-time.
	DowntimeMs int64 `json:"downtimeMs,omitzero"`
	TotalMs    int64 `json:"totalMs,omitzero"`
}

// encodeRecord stamps the record version and marshals r.
func encodeRecord(r *Record) ([]byte, error) {
	r.Version = recordVersion
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encode record %q: %w", r.UID, err)
	}
	return b, nil
}

// decodeRecord unmarshals a stored record. The result shares no memory with
// b, which may point into bbolt's mmap.
func decodeRecord(uid string, b []byte) (Record, error) {
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return Record{}, fmt.Errorf("decode record %q: %w", uid, err)
	}
	if r.Version > recordVersion {
		return Record{}, fmt.Errorf("decode record %q: version %d, want <= %d: %w",
			uid, r.Version, recordVersion, ErrVersion)
	}
	return r, nil
}
