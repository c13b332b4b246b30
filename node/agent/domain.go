package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/netsetup"
	"github.com/nodevirt/nodevirt/qmp"
	"github.com/nodevirt/nodevirt/store"
)

// domain is what this agent process holds for one running VMI: the QMP
// connection, the guest agent, the DHCP servers. It is rebuilt after a
// restart by attach and ensureNetwork; nothing in it is the source of truth.
//
// Its watchers only update the view and enqueue the VMI's key: every
// decision is made by sync.
type domain struct {
	uid     string
	enqueue func(uid string)
	log     *slog.Logger
	qemu    QEMUDialer
	procs   Processes
	net     Network

	// attachMu makes attach one at a time: QEMU serves one QMP client,
	// so a second dial would wait for the first connection to end.
	attachMu sync.Mutex

	mu        sync.Mutex
	closed    bool // close was called: attach keeps nothing
	conn      MonitorConn
	proc      store.Process // QEMU's identity, learnt by attach
	runState  string
	agentOK   bool
	probed    bool
	osInfo    v1.VirtualMachineInstanceGuestOSInfo
	netReady  bool
	stopDHCP  context.CancelFunc
	stopWatch context.CancelFunc
	ga        GuestAgent // the guest agent connection, shared with the node API
	guestNet  guestNet   // the guest's interfaces as its agent reports them
	// rebootWaiter is the node API call waiting for a soft reboot through
	// the power button (reboot.go), nil when none waits.
	rebootWaiter chan error

	// The outgoing migration's last RAM remaining and when it last shrank
	// (progressTimeout).
	migRemaining int64
	migProgress  time.Time
	// migStatus is the last MIGRATION event's status on this connection:
	// on a QEMU that was itself a migration target, query-migrate reports
	// its old incoming status ("completed") over the outgoing one (QEMU
	// 7.2), so the events are the outgoing migration's truth.
	migStatus string

	// quitAt is when this process's quit was accepted (ActQuit).
	quitAt time.Time

	// lastWrite is the agent's last status write of the VMI
	// (statusmemo.go).
	lastWrite statusMemo

	// opMu serialises run-state changes (pause, unpause and their
	// re-application by sync) so an intent and its QMP command are never
	// interleaved with another's.
	opMu sync.Mutex
}

// view returns the domain's part of an observation.
func (d *domain) view() RuntimeView {
	d.mu.Lock()
	defer d.mu.Unlock()
	return RuntimeView{
		QMPConnected:   d.conn != nil,
		RunState:       d.runState,
		NetworkReady:   d.netReady,
		AgentConnected: d.agentOK,
		AgentProbed:    d.probed,
	}
}

// qmpConn returns the connection, nil when not attached.
func (d *domain) qmpConn() MonitorConn {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.conn
}

// attach connects to QEMU's QMP socket, learns QEMU's host pid through
// SO_PEERCRED and starts the watchers. It returns QEMU's process identity.
// Attached already (preattach.go), it returns the identity it learnt then
// and dialed false.
func (d *domain) attach(ctx context.Context, qmpPath, qgaPath string) (proc store.Process, dialed bool, err error) {
	d.attachMu.Lock()
	defer d.attachMu.Unlock()
	d.mu.Lock()
	conn, proc := d.conn, d.proc
	d.mu.Unlock()
	if conn != nil {
		return proc, false, nil
	}
	conn, pid, err := d.qemu.DialQMP(ctx, qmpPath)
	if err != nil {
		return store.Process{}, false, fmt.Errorf("attach QMP: %w", err)
	}
	proc, err = d.procs.Identify(pid)
	if err != nil {
		conn.Close()
		return store.Process{}, false, fmt.Errorf("attach QMP %s: %w", qmpPath, err)
	}
	st, err := conn.QueryStatus(ctx)
	if err != nil {
		conn.Close()
		return store.Process{}, false, fmt.Errorf("attach: query-status: %w", err)
	}
	wctx, cancel := context.WithCancel(context.Background())
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		cancel()
		conn.Close()
		return store.Process{}, false, errDomainClosed
	}
	if d.stopWatch != nil {
		d.stopWatch()
	}
	d.conn, d.proc, d.runState, d.stopWatch = conn, proc, st.Status, cancel
	d.mu.Unlock()
	probeNow := make(chan struct{}, 1)
	go d.watchQMP(wctx, conn, probeNow)
	go d.watchGuestAgent(wctx, qgaPath, probeNow)
	return proc, true, nil
}

// errDomainClosed: the domain was closed (released, or the agent stops)
// while attach dialed.
var errDomainClosed = errors.New("domain closed while attaching")

// watchQMP follows run-state events until the connection ends, and tells
// the guest agent watcher (probeNow) when qemu-ga may have just become
// reachable: the guest opened a virtio-serial port (qemu-ga started), or
// its vCPUs run again (a resume, an incoming migration's guest arriving,
// a guest started paused running for the first time), so a qemu-ga that
// could not answer while they were stopped is asked at once.
func (d *domain) watchQMP(ctx context.Context, conn MonitorConn, probeNow chan<- struct{}) {
	poke := func() {
		select {
		case probeNow <- struct{}{}:
		default: // a probe is already due
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-conn.Done():
			d.mu.Lock()
			if d.conn == conn {
				d.conn, d.runState = nil, ""
			}
			d.mu.Unlock()
			d.enqueue(d.uid)
			return
		case ev, ok := <-conn.Events():
			if !ok {
				continue // closed with the connection: Done follows
			}
			if ev.Name == "VSERPORT_CHANGE" {
				if vserportOpened(ev.Data) {
					poke()
				}
				continue
			}
			if ev.Name == "MIGRATION" {
				d.setMigrationStatus(migrationEventStatus(ev.Data))
			}
			if resumed := d.onEvent(ctx, conn, ev.Name, conn.Dropped() > 0); resumed {
				poke()
			}
		}
	}
}

// onEvent updates the run state after event name and enqueues the VMI. It
// reports whether the guest's vCPUs went from halted (guestHalted) to
// running: after a pause, after an incoming migration's guest arrived and
// was resumed, or the first run of a guest started paused.
func (d *domain) onEvent(ctx context.Context, conn Monitor, name string, dropped bool) (resumed bool) {
	state := ""
	switch name {
	case "STOP":
		state = "paused"
		d.mu.Lock()
		if d.runState == "shutdown" {
			// QEMU stops the vCPUs right after the guest's SHUTDOWN when
			// its shutdown action is pause (a soft reboot): the run state
			// is "shutdown", not a user's pause.
			state = "shutdown"
		}
		d.mu.Unlock()
	case "RESUME":
		state = "running"
	case "SHUTDOWN":
		state = "shutdown"
	case "POWERDOWN", "MIGRATION":
		// MIGRATION: the run state may change with it (inmigrate to
		// running on a target, postmigrate on a source); the sync asks
		// QEMU how the migration goes.
	default:
		if !dropped {
			return false
		}
	}
	if state == "" || dropped {
		qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		st, err := conn.QueryStatus(qctx)
		cancel()
		if err != nil {
			return false // the connection is failing; Done will follow
		}
		state = st.Status
	}
	d.mu.Lock()
	resumed = guestHalted(d.runState) && state == qmp.RunStateRunning
	d.runState = state
	d.mu.Unlock()
	d.enqueue(d.uid)
	return resumed
}

// guestHalted reports whether a QEMU in run state s holds its guest's
// vCPUs stopped, so qemu-ga in it cannot answer: an incoming migration's
// guest that has not arrived (inmigrate), a guest started paused that never
// ran (prelaunch), a paused guest. A guest agent probe then would only sit
// in the channel until a timeout; the guest agent watcher skips it and
// keeps the last connectivity it knew (AgentConnected stays what it was, as
// KubeVirt's does across a pause: the channel is still open).
func guestHalted(s string) bool {
	switch s {
	case qmp.RunStateInMigrate, qmp.RunStatePrelaunch, qmp.RunStatePaused:
		return true
	}
	return false
}

// halted reports guestHalted of the domain's current run state.
func (d *domain) halted() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return guestHalted(d.runState)
}

// vserportOpened reports whether a VSERPORT_CHANGE event's data says the
// guest opened the port.
func vserportOpened(data json.RawMessage) bool {
	var d struct {
		Open bool `json:"open"`
	}
	return json.Unmarshal(data, &d) == nil && d.Open
}

// serveDHCP (re)starts one DHCP server per interface result.
func (d *domain) serveDHCP(ctx context.Context, nsPath string, results []netsetup.Result) error {
	sctx, cancel := context.WithCancel(context.Background())
	var servers []DHCPServer
	for _, r := range results {
		s, err := d.net.ListenDHCP(ctx, nsPath, r.Lease(), d.log)
		if err != nil {
			cancel()
			for _, s := range servers {
				s.Close()
			}
			return err
		}
		servers = append(servers, s)
	}
	for _, s := range servers {
		go func() {
			if err := s.Serve(sctx); err != nil {
				d.log.Warn("dhcp server stopped", "uid", d.uid, "err", err)
			}
		}()
	}
	d.mu.Lock()
	if d.stopDHCP != nil {
		d.stopDHCP()
	}
	d.stopDHCP, d.netReady = cancel, true
	d.mu.Unlock()
	return nil
}

// detach closes the QMP connection and stops its watchers; the domain
// stays usable and the next attach dials again.
func (d *domain) detach() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.detachLocked()
}

func (d *domain) detachLocked() {
	if d.stopWatch != nil {
		d.stopWatch()
		d.stopWatch = nil
	}
	if d.conn != nil {
		d.conn.Close()
		d.conn = nil
	}
	d.runState = ""
}

// close stops the watchers and DHCP servers and closes the connections;
// an attach after it keeps nothing.
func (d *domain) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
	d.detachLocked()
	if d.stopDHCP != nil {
		d.stopDHCP()
		d.stopDHCP = nil
	}
	d.netReady, d.agentOK, d.probed = false, false, false
}

// setRunState records a run state the agent itself just caused.
func (d *domain) setRunState(s string) {
	d.mu.Lock()
	if d.conn != nil {
		d.runState = s
	}
	d.mu.Unlock()
}

// progress records the outgoing migration's remaining RAM at now and
// returns when it last shrank; a zero now resets the clock.
func (d *domain) progress(remaining int64, now time.Time) time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	if now.IsZero() {
		d.migProgress, d.migRemaining = time.Time{}, 0
		return now
	}
	if d.migProgress.IsZero() || remaining < d.migRemaining {
		d.migProgress = now
	}
	d.migRemaining = remaining
	return d.migProgress
}

// migrationEventStatus is the status of a MIGRATION event's data.
func migrationEventStatus(data json.RawMessage) string {
	var d struct {
		Status string `json:"status"`
	}
	_ = json.Unmarshal(data, &d)
	return d.Status
}

func (d *domain) setMigrationStatus(s string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.migStatus = s
}

// migrationStatus is the last MIGRATION event's status seen by this
// process ("" when none since the last reset).
func (d *domain) migrationStatus() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.migStatus
}

func (d *domain) setQuitAt(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.quitAt = t
}

// quitSentAt is when QEMU accepted this process's quit (zero: never).
func (d *domain) quitSentAt() time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.quitAt
}
