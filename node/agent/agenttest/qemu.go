package agenttest

import (
	"context"
	"errors"
	"fmt"
	"sync"

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

func (q *QEMU) setRunState(s string) {
	q.mu.Lock()
	q.runState = s
	q.mu.Unlock()
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

// Monitor is a fake QMP connection to a QEMU.
type Monitor struct {
	q      *QEMU
	events chan qmp.Event
	done   chan struct{}
	once   sync.Once
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

// Stop logs "qmp.Stop" and pauses the guest.
func (m *Monitor) Stop(context.Context) error { return m.command("qmp.Stop", qmp.RunStatePaused) }

// Cont logs "qmp.Cont" and resumes the guest.
func (m *Monitor) Cont(context.Context) error { return m.command("qmp.Cont", qmp.RunStateRunning) }

// SystemPowerdown logs "qmp.SystemPowerdown"; the guest does nothing
// until the test says so.
func (m *Monitor) SystemPowerdown(context.Context) error { return m.command("qmp.SystemPowerdown", "") }

// Quit logs "qmp.Quit"; QEMU exits.
func (m *Monitor) Quit(context.Context) error {
	if err := m.command("qmp.Quit", ""); err != nil {
		return err
	}
	m.q.Exit()
	return nil
}

func (m *Monitor) command(op, state string) error {
	if err := m.q.log.call(op); err != nil {
		return err
	}
	select {
	case <-m.done:
		return errors.New("agenttest: QMP connection closed")
	default:
	}
	if state != "" {
		m.q.setRunState(state)
	}
	return nil
}

// Events are the connection's events (none unless a test sends some).
func (m *Monitor) Events() <-chan qmp.Event { return m.events }

// Dropped is always 0.
func (m *Monitor) Dropped() uint64 { return 0 }

// Done is closed when QEMU exits or the connection is closed.
func (m *Monitor) Done() <-chan struct{} { return m.done }

// Close ends the connection.
func (m *Monitor) Close() error {
	m.end()
	return nil
}
