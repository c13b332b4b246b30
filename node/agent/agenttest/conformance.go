package agenttest

import (
	"context"
	"testing"
	"time"

	"github.com/nodevirt/nodevirt/hack/testenv"
	"github.com/nodevirt/nodevirt/node/agent"
	"github.com/nodevirt/nodevirt/qmp"
	"github.com/nodevirt/nodevirt/store"
)

// Conformance suites: what the agent relies on from each of its effects.
// Each runs against the fake in this package and against the host
// implementation (node/agent conformance_test.go), so the fakes the sync
// tests use cannot drift from the host. A suite takes the implementation
// and the hooks it needs to drive the world around it, as an Env.

// waitTimeout bounds every wait of the suites (real QEMU under TCG, a
// loaded CI machine).
const waitTimeout = 10 * time.Second

// ProcessesEnv is an agent.Processes with a way to start and end
// processes behind its back.
type ProcessesEnv struct {
	Processes agent.Processes
	// Start starts a live process and returns its pid; the env ends it
	// when the test ends.
	Start func(t *testing.T) int
	// Exit ends the process pid (not through Processes.Kill) and
	// returns once it is gone.
	Exit func(t *testing.T, pid int)
	// Killed reports whether the process pid is gone or doomed by a
	// SIGKILL, the moment the kill returned (a killed process takes a
	// while to go).
	Killed func(t *testing.T, pid int) bool
}

// TestProcesses checks p: Identify gives a live process a stable
// identity; Alive holds while it lives and not after it exits, nor for an
// identity with another start time or boot (a reused pid) or none; Kill
// ends the process, leaves a process with a reused pid alone, and is no
// error for a process gone already.
func TestProcesses(t *testing.T, env ProcessesEnv) {
	p := env.Processes
	pid := env.Start(t)
	id, err := p.Identify(pid)
	if err != nil {
		t.Fatalf("Identify(%d) of a live process: %v", pid, err)
	}
	if id.PID != pid || id.StartTime == 0 || id.BootID == "" {
		t.Errorf("Identify(%d) = %+v, want that pid with a start time and a boot", pid, id)
	}
	if again, err := p.Identify(pid); err != nil || again != id {
		t.Errorf("Identify(%d) again = %+v, %v; want %+v (stable)", pid, again, err, id)
	}
	if !p.Alive(id) {
		t.Errorf("Alive(%+v) of a live process = false", id)
	}

	reused := id
	reused.StartTime++
	otherBoot := id
	otherBoot.BootID = "another-boot"
	for what, q := range map[string]store.Process{"another start time": reused, "another boot": otherBoot, "zero": {}} {
		if p.Alive(q) {
			t.Errorf("Alive of an identity with %s (%+v) = true", what, q)
		}
	}

	if err := p.Kill(reused); err != nil {
		t.Errorf("Kill of a reused pid's identity: %v", err)
	}
	if env.Killed(t, pid) {
		t.Fatalf("Kill(%+v) killed the live process %+v that reuses its pid", reused, id)
	}

	if err := p.Kill(id); err != nil {
		t.Fatalf("Kill(%+v): %v", id, err)
	}
	if !env.Killed(t, pid) {
		t.Errorf("Kill(%+v) returned, the process is not killed", id)
	}
	testenv.Eventually(t, waitTimeout, "killed process not Alive", func() bool { return !p.Alive(id) })
	if err := p.Kill(id); err != nil {
		t.Errorf("Kill of a process gone already: %v", err)
	}

	pid2 := env.Start(t)
	id2, err := p.Identify(pid2)
	if err != nil {
		t.Fatalf("Identify(%d): %v", pid2, err)
	}
	env.Exit(t, pid2)
	if p.Alive(id2) {
		t.Errorf("Alive(%+v) after the process exited = true", id2)
	}
	if got, err := p.Identify(pid2); err == nil && got == id2 {
		t.Errorf("Identify(%d) after the process exited = %+v, the old identity", pid2, got)
	}
	if err := p.Kill(id2); err != nil {
		t.Errorf("Kill of a process that exited: %v", err)
	}
}

// QEMUEnv is an agent.QEMUDialer with one QEMU to dial.
type QEMUEnv struct {
	QEMU agent.QEMUDialer
	// QMP is the QEMU's QMP socket path; nothing listens there before
	// Start.
	QMP string
	// GuestAgent is a guest agent socket path nothing listens on.
	GuestAgent string
	// Start starts the QEMU with a running guest, returns once QMP
	// accepts a connection, and returns the QEMU's host pid. The env
	// ends the QEMU when the test ends.
	Start func(t *testing.T) int
}

// TestQEMUDialer checks q and its connections: dialing a socket nothing
// listens on fails; DialQMP returns QEMU's pid; Close ends a connection
// (Done); query-status, stop and cont move the run state with STOP and
// RESUME events; system_powerdown emits POWERDOWN; quit ends QEMU and the
// connection (Done), after which commands and dials fail.
func TestQEMUDialer(t *testing.T, env QEMUEnv) {
	q := env.QEMU
	if c, _, err := q.DialQMP(ctxFor(t, 5*time.Second), env.QMP); err == nil {
		c.Close()
		t.Fatalf("DialQMP(%s) before QEMU listens: no error", env.QMP)
	}
	if ga, err := q.DialGuestAgent(ctxFor(t, 5*time.Second), env.GuestAgent); err == nil {
		ga.Close()
		t.Errorf("DialGuestAgent(%s) with nothing listening: no error", env.GuestAgent)
	}

	pid := env.Start(t)
	first := dialQMP(t, q, env.QMP, pid)
	if err := first.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	waitDone(t, first, "after Close")
	if _, err := first.QueryStatus(ctxFor(t, 5*time.Second)); err == nil {
		t.Errorf("QueryStatus on a closed connection: no error")
	}

	c := dialQMP(t, q, env.QMP, pid)
	defer c.Close()
	wantStatus(t, c, qmp.RunStateRunning)
	steps := []struct {
		name  string
		do    func(context.Context) error
		event string
		state string
	}{
		{"Stop", c.Stop, qmp.EventStop, qmp.RunStatePaused},
		{"Cont", c.Cont, qmp.EventResume, qmp.RunStateRunning},
		{"SystemPowerdown", c.SystemPowerdown, qmp.EventPowerdown, ""},
	}
	for _, s := range steps {
		if err := s.do(ctxFor(t, waitTimeout)); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		waitEvent(t, c, s.event)
		if s.state != "" {
			wantStatus(t, c, s.state)
		}
	}
	if n := c.Dropped(); n != 0 {
		t.Errorf("Dropped() = %d, want 0", n)
	}

	if err := c.Quit(ctxFor(t, waitTimeout)); err != nil {
		t.Fatalf("Quit: %v", err)
	}
	waitDone(t, c, "after Quit")
	if err := c.Stop(ctxFor(t, 5*time.Second)); err == nil {
		t.Errorf("Stop after Quit: no error")
	}
	testenv.Eventually(t, waitTimeout, "DialQMP to fail after Quit", func() bool {
		c, _, err := q.DialQMP(ctxFor(t, 5*time.Second), env.QMP)
		if err == nil {
			c.Close()
		}
		return err != nil
	})
}

// dialQMP dials path and checks the peer pid.
func dialQMP(t *testing.T, q agent.QEMUDialer, path string, pid int) agent.MonitorConn {
	t.Helper()
	c, got, err := q.DialQMP(ctxFor(t, waitTimeout), path)
	if err != nil {
		t.Fatalf("DialQMP(%s): %v", path, err)
	}
	t.Cleanup(func() { c.Close() })
	if got != pid {
		t.Errorf("DialQMP peer pid = %d, want QEMU's %d", got, pid)
	}
	return c
}

func wantStatus(t *testing.T, c agent.Monitor, state string) {
	t.Helper()
	st, err := c.QueryStatus(ctxFor(t, waitTimeout))
	if err != nil || st.Status != state || st.Running != (state == qmp.RunStateRunning) {
		t.Errorf("QueryStatus = %+v, %v; want status %q", st, err, state)
	}
}

// waitEvent waits for the event name, skipping others.
func waitEvent(t *testing.T, c agent.MonitorConn, name string) {
	t.Helper()
	timeout := time.After(waitTimeout)
	for {
		select {
		case ev, ok := <-c.Events():
			if !ok {
				t.Fatalf("events closed waiting for %s", name)
			}
			if ev.Name == name {
				return
			}
		case <-c.Done():
			t.Fatalf("connection ended waiting for event %s", name)
		case <-timeout:
			t.Fatalf("no %s event within %v", name, waitTimeout)
		}
	}
}

func waitDone(t *testing.T, c agent.MonitorConn, what string) {
	t.Helper()
	select {
	case <-c.Done():
	case <-time.After(waitTimeout):
		t.Fatalf("connection not Done %s within %v", what, waitTimeout)
	}
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
