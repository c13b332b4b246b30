package qmp

import (
	"context"
	"errors"
)

// RunState values reported by query-status (QEMU's RunState).
const (
	RunStateDebug         = "debug"
	RunStateFinishMigrate = "finish-migrate"
	RunStateGuestPanicked = "guest-panicked"
	RunStateInMigrate     = "inmigrate"
	RunStateInternalError = "internal-error"
	RunStateIOError       = "io-error"
	RunStatePaused        = "paused"
	RunStatePostMigrate   = "postmigrate"
	RunStatePrelaunch     = "prelaunch"
	RunStateRestoreVM     = "restore-vm"
	RunStateRunning       = "running"
	RunStateSaveVM        = "save-vm"
	RunStateShutdown      = "shutdown"
	RunStateSuspended     = "suspended"
	RunStateWatchdog      = "watchdog"
)

// StatusInfo is the reply of query-status.
type StatusInfo struct {
	Running bool   `json:"running"`
	Status  string `json:"status"` // a RunState* value
}

// QueryStatus returns the VM's run state.
func (c *Conn) QueryStatus(ctx context.Context) (StatusInfo, error) {
	var st StatusInfo
	err := c.Execute(ctx, "query-status", nil, &st)
	return st, err
}

// Stop pauses the guest's vCPUs (QEMU emits STOP).
func (c *Conn) Stop(ctx context.Context) error {
	return c.Execute(ctx, "stop", nil, nil)
}

// Cont resumes the guest's vCPUs (QEMU emits RESUME).
func (c *Conn) Cont(ctx context.Context) error {
	return c.Execute(ctx, "cont", nil, nil)
}

// SystemPowerdown presses the ACPI power button; the guest decides.
func (c *Conn) SystemPowerdown(ctx context.Context) error {
	return c.Execute(ctx, "system_powerdown", nil, nil)
}

// SystemReset resets the machine like a reset button.
func (c *Conn) SystemReset(ctx context.Context) error {
	return c.Execute(ctx, "system_reset", nil, nil)
}

// Quit makes QEMU exit at once. A connection that QEMU closes before its
// reply arrives counts as success: that is what quit does.
func (c *Conn) Quit(ctx context.Context) error {
	err := c.Execute(ctx, "quit", nil, nil)
	if errors.Is(err, ErrClosed) {
		select {
		case <-c.done:
			if c.localClose() {
				return err
			}
			return nil
		default:
		}
	}
	return err
}

// localClose reports whether the connection was ended by Close rather than
// by the peer.
func (c *Conn) localClose() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closedByUs
}

// Shutdown actions of set-action (QEMU ≥ 6.0): what QEMU does when the
// guest shuts down.
const (
	ShutdownActionPoweroff = "poweroff" // QEMU's default: the process exits
	ShutdownActionPause    = "pause"    // vCPUs stop; run state "shutdown"
)

// SetShutdownAction sets what QEMU does on a guest shutdown (set-action
// shutdown=action). With ShutdownActionPause a guest power-off leaves QEMU
// running with the run state "shutdown"; system_reset and cont boot it
// again (libvirt's "fake reboot").
func (c *Conn) SetShutdownAction(ctx context.Context, action string) error {
	return c.Execute(ctx, "set-action", map[string]string{"shutdown": action}, nil)
}
