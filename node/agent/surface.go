package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"

	"github.com/nodevirt/nodevirt/node/api"
	"github.com/nodevirt/nodevirt/node/launchspec"
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

// SoftReboot asks the guest to reboot through its guest agent, or, without
// a connected guest agent, through the ACPI power button with QEMU kept
// alive across the guest's shutdown (reboot.go), as KubeVirt falls back to
// an ACPI reboot.
func (a *Agent) SoftReboot(ctx context.Context, uid string) error {
	d, err := a.liveDomain(ctx, uid)
	if err != nil {
		return err
	}
	ga := rawAgent(d.guestAgent())
	if ga == nil {
		return a.acpiReboot(ctx, uid, d)
	}
	if err := a.deps.Store.AppendEvent(ctx, uid, a.event("SoftRebootRequested", "node API")); err != nil {
		return err
	}
	if err := ga.Shutdown(ctx, qmp.ShutdownReboot); err != nil {
		return fmt.Errorf("domain %s: guest-shutdown reboot: %w", uid, err)
	}
	return nil
}

// Screenshot returns the guest's screen as PNG: QEMU writes it (QMP
// screendump) into the pod's sockets directory, which the agent reads
// through the host's view of the same emptyDir, then removes.
func (a *Agent) Screenshot(ctx context.Context, uid string, moveCursor bool) ([]byte, error) {
	d, err := a.liveDomain(ctx, uid)
	if err != nil {
		return nil, err
	}
	c := rawQMP(d.qmpConn())
	if c == nil {
		return nil, fmt.Errorf("domain %s: %w", uid, api.ErrNotRunning)
	}
	rec, err := a.deps.Store.Get(ctx, uid)
	if err != nil {
		return nil, err
	}
	if !hasGraphics(rec.Spec) {
		return nil, fmt.Errorf("domain %s: %w", uid, api.ErrNoGraphics)
	}
	if moveCursor {
		// Best effort, as in KubeVirt: a guest without a pointer device
		// still has a screen.
		err := c.MovePointer(ctx, 1, 1)
		if err == nil {
			err = c.MovePointer(ctx, -1, -1)
		}
		if err != nil {
			a.log.Debug("screenshot: move pointer", "uid", uid, "err", err)
		}
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	name := "screenshot-" + hex.EncodeToString(rnd[:]) + ".png"
	host := filepath.Join(rec.Sockets.Dir, name)
	defer os.Remove(host)
	if err := c.Screendump(ctx, launchspec.DefaultPaths().Socket(name), qmp.ScreendumpPNG); err != nil {
		return nil, fmt.Errorf("domain %s: screendump: %w", uid, err)
	}
	img, err := os.ReadFile(host)
	if err != nil {
		return nil, fmt.Errorf("domain %s: read screendump: %w", uid, err)
	}
	return img, nil
}

// hasGraphics reports whether the launch spec gives QEMU a VNC display
// (autoattachGraphicsDevice, on by default).
func hasGraphics(raw json.RawMessage) bool {
	var spec launchspec.Spec
	if json.Unmarshal(raw, &spec) != nil {
		return false
	}
	return slices.Contains(spec.Args, "-vnc")
}

// DialGuest connects to the guest's port from its pod network: inside the
// pod netns (QEMU's) to the address the guest was handed (masquerade: its
// private address behind the pod IP). A bridge-bound guest owns the pod IP
// and the pod netns keeps no route to it, so it is dialed from the node,
// which routes pod IPs, as KubeVirt's virt-api dials the pod IP.
func (a *Agent) DialGuest(ctx context.Context, uid, network string, port int) (net.Conn, error) {
	d, err := a.liveDomain(ctx, uid)
	if err != nil {
		return nil, err
	}
	conn := d.qmpConn()
	if conn == nil {
		return nil, fmt.Errorf("domain %s: %w", uid, api.ErrNotRunning)
	}
	rec, err := a.deps.Store.Get(ctx, uid)
	if err != nil {
		return nil, err
	}
	if rec.Intent.Paused || d.view().RunState == qmp.RunStatePaused {
		return nil, fmt.Errorf("domain %s: %w", uid, api.ErrPaused)
	}
	for _, i := range rec.Interfaces {
		if len(i.IPs) == 0 {
			continue
		}
		addr := netip.AddrPortFrom(i.IPs[0].Addr(), uint16(port)).String()
		if i.Binding == bindingBridge {
			var nd net.Dialer
			c, err := nd.DialContext(ctx, network, addr)
			if err != nil {
				return nil, fmt.Errorf("domain %s: %w", uid, err)
			}
			return c, nil
		}
		if !a.deps.Processes.Alive(rec.Process) {
			return nil, fmt.Errorf("domain %s: QEMU is gone: %w", uid, api.ErrNotRunning)
		}
		c, err := a.deps.Network.Dial(ctx, netnsPath(rec.Process.PID), network, addr)
		if err != nil {
			return nil, fmt.Errorf("domain %s: %w", uid, err)
		}
		return c, nil
	}
	return nil, fmt.Errorf("domain %s: %w", uid, api.ErrNoGuestAddress)
}

// Records is the agent's store, for the node API's read-only views.
func (a *Agent) Records() *store.DB { return a.deps.Store }
