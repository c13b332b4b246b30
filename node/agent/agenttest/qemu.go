package agenttest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/nodevirt/nodevirt/node/agent"
	"github.com/nodevirt/nodevirt/qmp"
)

// ErrNoGuestAgent is what dialing the fake guest agent returns.
var ErrNoGuestAgent = errors.New("agenttest: no guest agent")

// QEMU is a fake agent.QEMUDialer for one QEMU with host pid PID: DialQMP
// connects to it while it listens (Listen), else it fails. The guest agent
// never answers.
type QEMU struct {
	log *Log
	pid int

	mu        sync.Mutex
	listening bool
	runState  string
	conns     []*Monitor
}

// NewQEMU returns a QEMU with host pid pid that does not listen yet.
func NewQEMU(log *Log, pid int) *QEMU {
	return &QEMU{log: log, pid: pid, runState: qmp.RunStateRunning}
}

// Listen makes QMP dialable (QEMU started), with run state state.
func (q *QEMU) Listen(state string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.listening, q.runState = true, state
}

// Exit ends QEMU: the socket stops listening and every connection ends.
func (q *QEMU) Exit() {
	q.mu.Lock()
	conns := q.conns
	q.listening, q.conns = false, nil
	q.mu.Unlock()
	for _, c := range conns {
		c.end()
	}
}

// RunState is QEMU's run state (query-status).
func (q *QEMU) RunState() string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.runState
}

// setRunState sets the run state and reports whether it changed.
func (q *QEMU) setRunState(s string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	changed := q.runState != s
	q.runState = s
	return changed
}

// DialQMP logs "qmp.Dial" and connects when QEMU listens.
func (q *QEMU) DialQMP(_ context.Context, path string) (agent.MonitorConn, int, error) {
	if err := q.log.call("qmp.Dial"); err != nil {
		return nil, 0, err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.listening {
		return nil, 0, fmt.Errorf("dial %s: connection refused", path)
	}
	c := &Monitor{q: q, events: make(chan qmp.Event, 8), done: make(chan struct{})}
	q.conns = append(q.conns, c)
	return c, q.pid, nil
}

// DialGuestAgent fails: no guest agent answers.
func (q *QEMU) DialGuestAgent(context.Context, string) (agent.GuestAgent, error) {
	return nil, ErrNoGuestAgent
}

// Monitor is a fake QMP connection to a QEMU. Like QEMU, it emits STOP
// and RESUME when Stop and Cont change the run state, and POWERDOWN on
// SystemPowerdown; an event that finds the buffer full is dropped.
type Monitor struct {
	q       *QEMU
	events  chan qmp.Event
	done    chan struct{}
	once    sync.Once
	dropped atomic.Uint64
}

func (m *Monitor) end() { m.once.Do(func() { close(m.done) }) }

// QueryStatus returns QEMU's run state.
func (m *Monitor) QueryStatus(context.Context) (qmp.StatusInfo, error) {
	select {
	case <-m.done:
		return qmp.StatusInfo{}, errors.New("agenttest: QMP connection closed")
	default:
	}
	s := m.q.RunState()
	return qmp.StatusInfo{Running: s == qmp.RunStateRunning, Status: s}, nil
}

// Stop logs "qmp.Stop" and pauses the guest (event STOP).
func (m *Monitor) Stop(context.Context) error {
	return m.command("qmp.Stop", qmp.RunStatePaused, qmp.EventStop)
}

// Cont logs "qmp.Cont" and resumes the guest (event RESUME).
func (m *Monitor) Cont(context.Context) error {
	return m.command("qmp.Cont", qmp.RunStateRunning, qmp.EventResume)
}

// SystemPowerdown logs "qmp.SystemPowerdown" and emits POWERDOWN; the
// guest does nothing until the test says so.
func (m *Monitor) SystemPowerdown(context.Context) error {
	if err := m.command("qmp.SystemPowerdown", "", ""); err != nil {
		return err
	}
	m.emit(qmp.EventPowerdown)
	return nil
}

// Quit logs "qmp.Quit"; QEMU exits.
func (m *Monitor) Quit(context.Context) error {
	if err := m.command("qmp.Quit", "", ""); err != nil {
		return err
	}
	m.q.Exit()
	return nil
}

// command logs op and, on a live connection, sets the run state to state
// (if not empty), emitting event when that changes it.
func (m *Monitor) command(op, state, event string) error {
	if err := m.q.log.call(op); err != nil {
		return err
	}
	select {
	case <-m.done:
		return errors.New("agenttest: QMP connection closed")
	default:
	}
	if state != "" && m.q.setRunState(state) && event != "" {
		m.emit(event)
	}
	return nil
}

// emit queues the event name, or counts it dropped when the buffer is full.
func (m *Monitor) emit(name string) {
	select {
	case m.events <- qmp.Event{Name: name}:
	default:
		m.dropped.Add(1)
	}
}

// Events are the connection's events (STOP, RESUME, POWERDOWN).
func (m *Monitor) Events() <-chan qmp.Event { return m.events }

// Dropped counts the events lost to a full buffer.
func (m *Monitor) Dropped() uint64 { return m.dropped.Load() }

// Done is closed when QEMU exits or the connection is closed.
func (m *Monitor) Done() <-chan struct{} { return m.done }

// Close ends the connection.
func (m *Monitor) Close() error {
	m.end()
	return nil
}
