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

// ErrNotWaiting is what a fake launcher that holds no spec and is not
// waiting for one answers Launch (the host launcher's 503, stopping).
var ErrNotWaiting = errors.New("agenttest: launcher is not waiting for a spec")

// Launcher is a fake agent.Launcher: one launcher, whatever the socket.
// It starts up and waiting for a spec (Down first stands for a launcher not
// started yet); Launch moves it to Running.
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

// Launch logs "launcher.Launch"; unless it fails, a waiting launcher runs
// spec (at once: the fake has no preparing). As with the host launcher,
// the spec it holds again is accepted and changes nothing; another spec
// fails with launcher.ErrConflict; a launcher that exited without a spec
// refuses (ErrNotWaiting). Specs records every accepted call.
func (l *Launcher) Launch(ctx context.Context, socket string, spec launchspec.Spec) error {
	if err := l.log.call("launcher.Launch"); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case !l.up:
		return fmt.Errorf("launch on %s: %w", socket, ErrUnreachable)
	case l.status.SpecHash == spec.Hash:
	case l.status.SpecHash != "":
		return fmt.Errorf("launch on %s: %w", socket, launcher.ErrConflict)
	case l.status.State != launcher.StateWaiting:
		return fmt.Errorf("launch on %s: %w", socket, ErrNotWaiting)
	default:
		l.status = launcher.Status{State: launcher.StateRunning, SpecHash: spec.Hash}
	}
	l.specs = append(l.specs, spec)
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
