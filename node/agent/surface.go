package agent

import (
	"context"
	"fmt"

	"github.com/nodevirt/nodevirt/node/api"
	"github.com/nodevirt/nodevirt/qmp"
	"github.com/nodevirt/nodevirt/store"
)

// This file is what the node API (node/api) asks of the agent beyond
// pause and unpause: the connections it holds for a domain. The API shares
// them (QMP carries request ids; the guest agent serialises its callers),
// since QEMU's guest agent chardev takes one client at a time.

// QMP returns the QMP connection of the live domain uid.
func (a *Agent) QMP(ctx context.Context, uid string) (*qmp.Conn, error) {
	d, err := a.liveDomain(ctx, uid)
	if err != nil {
		return nil, err
	}
	c := rawQMP(d.qmpConn())
	if c == nil {
		return nil, fmt.Errorf("domain %s: %w", uid, api.ErrNotRunning)
	}
	return c, nil
}

// GuestAgent returns the guest agent connection of the live domain uid.
func (a *Agent) GuestAgent(ctx context.Context, uid string) (*qmp.Agent, error) {
	d, err := a.liveDomain(ctx, uid)
	if err != nil {
		return nil, err
	}
	ga := rawAgent(d.guestAgent())
	if ga == nil {
		return nil, fmt.Errorf("domain %s: %w", uid, api.ErrNoGuestAgent)
	}
	return ga, nil
}

// SoftReboot asks the guest to reboot through its guest agent. Without a
// guest agent there is no soft reboot (ACPI has no reboot button), so it
// fails with api.ErrNoGuestAgent, as KubeVirt does without ACPI reboot.
func (a *Agent) SoftReboot(ctx context.Context, uid string) error {
	ga, err := a.GuestAgent(ctx, uid)
	if err != nil {
		return err
	}
	if err := a.deps.Store.AppendEvent(ctx, uid, a.event("SoftRebootRequested", "node API")); err != nil {
		return err
	}
	if err := ga.Shutdown(ctx, qmp.ShutdownReboot); err != nil {
		return fmt.Errorf("domain %s: guest-shutdown reboot: %w", uid, err)
	}
	return nil
}

// Records is the agent's store, for the node API's read-only views.
func (a *Agent) Records() *store.DB { return a.deps.Store }
