package agenttest

import (
	"errors"
	"testing"
	"time"

	"github.com/nodevirt/nodevirt/hack/testenv"
	"github.com/nodevirt/nodevirt/node/agent"
	"github.com/nodevirt/nodevirt/node/launcher"
	"github.com/nodevirt/nodevirt/node/launchspec"
)

// LauncherEnv is an agent.Launcher with one launcher to reach.
type LauncherEnv struct {
	Launcher agent.Launcher
	// Socket is the launcher's control socket; nothing listens there
	// before Start.
	Socket string
	// Spec and Other are two different sealed specs the launcher can
	// run (a QEMU that starts and stays up).
	Spec, Other launchspec.Spec
	// Start starts the launcher, waiting for a spec, returns once it
	// answers on Socket, and returns its host pid. The env ends the
	// launcher and its QEMU when the test ends, and checks that no QEMU
	// is left.
	Start func(t *testing.T) int
}

// TestLauncher checks l: Status, Launch and PID fail on a socket nothing
// listens on; a started launcher has the env's pid and is waiting; Launch
// takes it through preparing to running with the spec's hash; the same
// spec again is accepted and changes nothing; another spec fails with
// launcher.ErrConflict and changes nothing.
func TestLauncher(t *testing.T, env LauncherEnv) {
	if env.Spec.Hash == "" || env.Other.Hash == "" || env.Spec.Hash == env.Other.Hash {
		t.Fatalf("LauncherEnv needs two sealed, different specs; hashes %q and %q", env.Spec.Hash, env.Other.Hash)
	}
	l := env.Launcher
	if st, err := l.Status(ctxFor(t, 5*time.Second), env.Socket); err == nil {
		t.Errorf("Status(%s) before the launcher listens = %+v, no error", env.Socket, st)
	}
	if err := l.Launch(ctxFor(t, 5*time.Second), env.Socket, env.Spec); err == nil {
		t.Errorf("Launch(%s) before the launcher listens: no error", env.Socket)
	}
	if pid, err := l.PID(ctxFor(t, 5*time.Second), env.Socket); err == nil {
		t.Errorf("PID(%s) before the launcher listens = %d, no error", env.Socket, pid)
	}

	pid := env.Start(t)
	if got, err := l.PID(ctxFor(t, waitTimeout), env.Socket); err != nil || got != pid {
		t.Errorf("PID = %d, %v; want the launcher's %d", got, err, pid)
	}
	if st := launcherStatus(t, l, env.Socket); st.State != launcher.StateWaiting || st.SpecHash != "" {
		t.Errorf("Status before Launch = %+v, want waiting with no spec", st)
	}

	if err := l.Launch(ctxFor(t, waitTimeout), env.Socket, env.Spec); err != nil {
		t.Fatalf("Launch(%s): %v", env.Spec.Hash, err)
	}
	waitRunning(t, l, env.Socket, env.Spec.Hash)

	if err := l.Launch(ctxFor(t, waitTimeout), env.Socket, env.Spec); err != nil {
		t.Errorf("Launch of the running spec again: %v, want accepted (idempotent)", err)
	}
	wantRunning(t, l, env.Socket, env.Spec.Hash, "after the same spec again")

	err := l.Launch(ctxFor(t, waitTimeout), env.Socket, env.Other)
	if !errors.Is(err, launcher.ErrConflict) {
		t.Errorf("Launch of another spec while one runs: %v, want launcher.ErrConflict", err)
	}
	wantRunning(t, l, env.Socket, env.Spec.Hash, "after a conflicting spec")
	if got, err := l.PID(ctxFor(t, waitTimeout), env.Socket); err != nil || got != pid {
		t.Errorf("PID after Launch = %d, %v; want %d", got, err, pid)
	}
}

func launcherStatus(t *testing.T, l agent.Launcher, socket string) launcher.Status {
	t.Helper()
	st, err := l.Status(ctxFor(t, waitTimeout), socket)
	if err != nil {
		t.Fatalf("Status(%s): %v", socket, err)
	}
	return st
}

// waitRunning polls until the launcher runs the spec hash; on the way it
// may only be preparing that spec.
func waitRunning(t *testing.T, l agent.Launcher, socket, hash string) {
	t.Helper()
	testenv.Eventually(t, waitTimeout, "the launcher to run the spec", func() bool {
		st := launcherStatus(t, l, socket)
		if st.SpecHash != hash || (st.State != launcher.StatePreparing && st.State != launcher.StateRunning) {
			t.Fatalf("Status after Launch(%s) = %+v, want preparing or running that spec", hash, st)
		}
		return st.State == launcher.StateRunning
	})
}

func wantRunning(t *testing.T, l agent.Launcher, socket, hash, when string) {
	t.Helper()
	if st := launcherStatus(t, l, socket); st.State != launcher.StateRunning || st.SpecHash != hash {
		t.Errorf("Status %s = %+v, want running %s", when, st, hash)
	}
}
