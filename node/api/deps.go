package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nodevirt/nodevirt/qmp"
	"github.com/nodevirt/nodevirt/store"
)

// Domains is what the API needs of the node agent. The UIDs are VMI UIDs.
type Domains interface {
	Pause(ctx context.Context, uid string) error
	Unpause(ctx context.Context, uid string) error
	SoftReboot(ctx context.Context, uid string) error
	// QMP and GuestAgent return the agent's shared connections.
	QMP(ctx context.Context, uid string) (*qmp.Conn, error)
	GuestAgent(ctx context.Context, uid string) (*qmp.Agent, error)
}

// Records is the read side of the node's store.
type Records interface {
	Get(ctx context.Context, uid string) (store.Record, error)
	List(ctx context.Context) ([]store.Record, error)
	Timeline(ctx context.Context, uid string) ([]store.Event, error)
}

// Config tunes the server.
type Config struct {
	// CallTimeout bounds every QMP and guest agent call of a request.
	CallTimeout time.Duration
	// PingPeriod is the websocket keep-alive period.
	PingPeriod time.Duration
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{CallTimeout: 10 * time.Second, PingPeriod: 30 * time.Second}
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
