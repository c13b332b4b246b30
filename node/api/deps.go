package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/nodevirt/nodevirt/qmp"
	"github.com/nodevirt/nodevirt/store"
)

// Domains is what the API needs of the node agent. The UIDs are VMI UIDs.
type Domains interface {
	Pause(ctx context.Context, uid string) error
	Unpause(ctx context.Context, uid string) error
	// SoftReboot reboots the guest through its guest agent, or, without
	// one, through the ACPI power button with QEMU kept alive across the
	// guest's shutdown; it returns once the guest was reset (or failed to
	// react: ErrTimeout).
	SoftReboot(ctx context.Context, uid string) error
	// Freeze freezes the guest's filesystems through its guest agent and
	// has the agent thaw them when timeout passes (durably: also after an
	// agent restart); freezing a frozen guest only renews the deadline.
	Freeze(ctx context.Context, uid string, timeout time.Duration) error
	// Unfreeze thaws the guest's filesystems now.
	Unfreeze(ctx context.Context, uid string) error
	// Screenshot returns the guest's screen as a PNG image; with
	// moveCursor the pointer is nudged first so a blanked screen wakes.
	Screenshot(ctx context.Context, uid string, moveCursor bool) ([]byte, error)
	// DialGuest connects to the guest's port over network ("tcp" or "udp")
	// from inside its pod network.
	DialGuest(ctx context.Context, uid, network string, port int) (net.Conn, error)
	// QMP and GuestAgent return the agent's shared connections.
	QMP(ctx context.Context, uid string) (*qmp.Conn, error)
	GuestAgent(ctx context.Context, uid string) (*qmp.Agent, error)
}

// Records is the read side of the node's store.
type Records interface {
	Get(ctx context.Context, uid string) (store.Record, error)
	List(ctx context.Context) ([]store.Record, error)
	// RefsByName names the records of the VMI namespace/name, tombstones
	// included; it must not cost more with more records on the node, nor
	// decode them.
	RefsByName(ctx context.Context, namespace, name string) ([]store.Ref, error)
	Timeline(ctx context.Context, uid string) ([]store.Event, error)
}

// Config tunes the server.
type Config struct {
	// CallTimeout bounds every QMP and guest agent call of a request.
	CallTimeout time.Duration
	// PingPeriod is the websocket keep-alive period.
	PingPeriod time.Duration
	// SoftRebootTimeout bounds a softreboot request, which waits for the
	// guest to shut down when it has no guest agent. Keep it below the
	// kube-apiserver's request timeout (60 s).
	SoftRebootTimeout time.Duration
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{CallTimeout: 10 * time.Second, PingPeriod: 30 * time.Second, SoftRebootTimeout: 55 * time.Second}
}

// Validate reports every problem of c at once.
func (c Config) Validate() error {
	var errs []error
	if c.CallTimeout <= 0 {
		errs = append(errs, fmt.Errorf("call timeout %v, want > 0", c.CallTimeout))
	}
	if c.PingPeriod <= 0 {
		errs = append(errs, fmt.Errorf("ping period %v, want > 0", c.PingPeriod))
	}
	if c.SoftRebootTimeout < c.CallTimeout {
		errs = append(errs, fmt.Errorf("soft reboot timeout %v, want >= call timeout %v", c.SoftRebootTimeout, c.CallTimeout))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("api config: %w", err)
	}
	return nil
}

// Deps are the server's collaborators.
type Deps struct {
	Domains Domains
	Records Records
	Log     *slog.Logger
}
