package agenttest

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/nodevirt/nodevirt/node/launcher"
	"github.com/nodevirt/nodevirt/node/launchspec"
)

// ErrUnreachable is what a fake launcher that is down answers.
var ErrUnreachable = errors.New("agenttest: launcher unreachable")

// Launcher is a fake agent.Launcher: one launcher, whatever the socket.
// It starts up and waiting for a spec; Launch moves it to Running.
type Launcher struct {
	log *Log

	mu     sync.Mutex
	up     bool
	pid    int
	status launcher.Status
	specs  []launchspec.Spec
}

// NewLauncher returns a launcher waiting for a spec, with host pid pid.
func NewLauncher(log *Log, pid int) *Launcher {
	return &Launcher{log: log, up: true, pid: pid, status: launcher.Status{State: launcher.StateWaiting}}
}

// Set makes the launcher up with status st.
func (l *Launcher) Set(st launcher.Status) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.up, l.status = true, st
}

// Down makes the launcher unreachable (its pod's process is gone).
func (l *Launcher) Down() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.up = false
}

// Specs returns the specs launched so far.
func (l *Launcher) Specs() []launchspec.Spec {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]launchspec.Spec(nil), l.specs...)
}

// Status returns the launcher's status, or ErrUnreachable when down.
func (l *Launcher) Status(ctx context.Context, socket string) (launcher.Status, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.up {
		return launcher.Status{}, fmt.Errorf("status of %s: %w", socket, ErrUnreachable)
	}
	return l.status, ctx.Err()
}

// Launch logs "launcher.Launch"; unless it fails, the launcher runs spec.
// A launcher already running another spec fails with launcher.ErrConflict.
func (l *Launcher) Launch(ctx context.Context, socket string, spec launchspec.Spec) error {
	if err := l.log.call("launcher.Launch"); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.up {
		return fmt.Errorf("launch on %s: %w", socket, ErrUnreachable)
	}
	if l.status.State == launcher.StateRunning && l.status.SpecHash != spec.Hash {
		return fmt.Errorf("launch on %s: %w", socket, launcher.ErrConflict)
	}
	l.specs = append(l.specs, spec)
	l.status = launcher.Status{State: launcher.StateRunning, SpecHash: spec.Hash}
	return ctx.Err()
}

// PID returns the launcher's pid, or ErrUnreachable when down.
func (l *Launcher) PID(_ context.Context, socket string) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.up {
		return 0, fmt.Errorf("pid of %s: %w", socket, ErrUnreachable)
	}
	return l.pid, nil
}
