package qmp

import (
	"encoding/json"
	"fmt"
	"sync/atomic"
	"time"
)

// Names of the events this package decodes into typed values (Event.Typed).
const (
	EventStop           = "STOP"
	EventResume         = "RESUME"
	EventShutdown       = "SHUTDOWN"
	EventReset          = "RESET"
	EventPowerdown      = "POWERDOWN"
	EventMigration      = "MIGRATION"
	EventGuestPanicked  = "GUEST_PANICKED"
	EventDeviceDeleted  = "DEVICE_DELETED"
	EventBalloonChanged = "BALLOON_CHANGE"
)

// Event is an asynchronous QMP event as QEMU sent it.
type Event struct {
	Name string          // e.g. "STOP"
	Data json.RawMessage // the event's "data" member; may be empty
	Time time.Time       // QEMU's timestamp
}

// StopEvent: the guest's vCPUs stopped (pause, migration completion, error).
type StopEvent struct{}

// ResumeEvent: the guest's vCPUs run again.
type ResumeEvent struct{}

// PowerdownEvent: system_powerdown pressed the ACPI power button.
type PowerdownEvent struct{}

// ShutdownEvent: the guest shut down (or QEMU was asked to quit).
// Guest is true when the guest itself initiated it; Reason is QEMU's
// ShutdownCause ("guest-shutdown", "host-qmp-quit", "host-signal", ...).
type ShutdownEvent struct {
	Guest  bool   `json:"guest"`
	Reason string `json:"reason"`
}

// ResetEvent: the guest was reset; Guest and Reason as in ShutdownEvent.
type ResetEvent struct {
	Guest  bool   `json:"guest"`
	Reason string `json:"reason"`
}

// MigrationEvent: the migration status changed (needs the "events"
// migration capability). Status is a MigrationStatus value.
type MigrationEvent struct {
	Status string `json:"status"`
}

// GuestPanickedEvent: the guest reported a panic (pvpanic or Hyper-V).
type GuestPanickedEvent struct {
	Action string          `json:"action"`
	Info   json.RawMessage `json:"info,omitempty"`
}

// DeviceDeletedEvent: device_del finished; the guest released the device.
type DeviceDeletedEvent struct {
	Device string `json:"device"`
	Path   string `json:"path"`
}

// BalloonChangedEvent: the balloon's actual size changed.
type BalloonChangedEvent struct {
	Actual int64 `json:"actual"`
}

// Typed decodes the event into its typed value: one of *StopEvent,
// *ResumeEvent, *ShutdownEvent, *ResetEvent, *PowerdownEvent,
// *MigrationEvent, *GuestPanickedEvent, *DeviceDeletedEvent,
// *BalloonChangedEvent. Events without a typed value return the Event itself.
func (e Event) Typed() (any, error) {
	var v any
	switch e.Name {
	case EventStop:
		v = new(StopEvent)
	case EventResume:
		v = new(ResumeEvent)
	case EventPowerdown:
		v = new(PowerdownEvent)
	case EventShutdown:
		v = new(ShutdownEvent)
	case EventReset:
		v = new(ResetEvent)
	case EventMigration:
		v = new(MigrationEvent)
	case EventGuestPanicked:
		v = new(GuestPanickedEvent)
	case EventDeviceDeleted:
		v = new(DeviceDeletedEvent)
	case EventBalloonChanged:
		v = new(BalloonChangedEvent)
	default:
		return e, nil
	}
	if len(e.Data) > 0 {
		if err := json.Unmarshal(e.Data, v); err != nil {
			return nil, fmt.Errorf("%w: event %s: %w", ErrProtocol, e.Name, err)
		}
	}
	return v, nil
}

// Subscription receives a Conn's events. Delivery never blocks the
// connection: when the channel is full the event is dropped and counted.
type Subscription struct {
	conn    *Conn
	ch      chan Event
	names   map[string]bool // nil: all events
	dropped atomic.Uint64
}

// Subscribe starts receiving events into a channel buffering size events
// (at least 1). With names, only those events are delivered. The channel is
// closed by Subscription.Close or when the connection ends.
func (c *Conn) Subscribe(size int, names ...string) *Subscription {
	s := &Subscription{conn: c, ch: make(chan Event, max(size, 1))}
	if len(names) > 0 {
		s.names = make(map[string]bool, len(names))
		for _, n := range names {
			s.names[n] = true
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		close(s.ch)
		return s
	}
	c.subs[s] = struct{}{}
	return s
}

// Events returns the channel events arrive on.
func (s *Subscription) Events() <-chan Event { return s.ch }

// Dropped returns how many events were lost because the channel was full.
func (s *Subscription) Dropped() uint64 { return s.dropped.Load() }

// Close stops delivery and closes the channel. Idempotent.
func (s *Subscription) Close() {
	c := s.conn
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.subs[s]; ok {
		delete(c.subs, s)
		close(s.ch)
	}
}

// publish hands e to every interested subscriber without blocking.
func (c *Conn) publish(e Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for s := range c.subs {
		if s.names != nil && !s.names[e.Name] {
			continue
		}
		select {
		case s.ch <- e:
		default:
			s.dropped.Add(1)
		}
	}
}
