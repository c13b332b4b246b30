package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"

	"golang.org/x/sys/unix"

	"github.com/nodevirt/nodevirt/netsetup"
	"github.com/nodevirt/nodevirt/node/launcher"
	"github.com/nodevirt/nodevirt/node/launchspec"
	"github.com/nodevirt/nodevirt/node/podfs"
	"github.com/nodevirt/nodevirt/node/unixsock"
	"github.com/nodevirt/nodevirt/qmp"
	"github.com/nodevirt/nodevirt/store"
)

// The host implementations of the agent's effects (effects.go). Each
// reaches unix sockets of any length (node/unixsock).

// HostLauncher talks to launchers over their control sockets.
type HostLauncher struct{}

// Status asks the launcher listening at socket for its status.
func (HostLauncher) Status(ctx context.Context, socket string) (launcher.Status, error) {
	var st launcher.Status
	err := unixsock.WithPath(socket, func(short string) error {
		var err error
		st, err = launcher.NewClient(short).Status(ctx)
		return err
	})
	return st, err
}

// Launch hands spec to the launcher listening at socket.
func (HostLauncher) Launch(ctx context.Context, socket string, spec launchspec.Spec) error {
	return unixsock.WithPath(socket, func(short string) error {
		_, err := launcher.NewClient(short).Launch(ctx, spec)
		return err
	})
}

// PID is the host pid of the launcher listening at socket.
func (HostLauncher) PID(ctx context.Context, socket string) (int, error) {
	var pid int
	err := unixsock.WithPath(socket, func(short string) error {
		var err error
		pid, err = launcher.PeerPID(ctx, short)
		return err
	})
	return pid, err
}

// HostNetwork is netsetup: links, nftables and DHCP in a pod netns.
type HostNetwork struct{}

// Ensure is netsetup.Ensure.
func (HostNetwork) Ensure(ctx context.Context, netns string, p netsetup.Plan) (netsetup.Result, error) {
	return netsetup.Ensure(ctx, netns, p)
}

// Release is netsetup.Release.
func (HostNetwork) Release(ctx context.Context, netns string, p netsetup.Plan) error {
	return netsetup.Release(ctx, netns, p)
}

// Dial is netsetup.DialInNetNS.
func (HostNetwork) Dial(ctx context.Context, netns, network, address string) (net.Conn, error) {
	return netsetup.DialInNetNS(ctx, netns, network, address)
}

// ListenDHCP is netsetup.ListenDHCP.
func (HostNetwork) ListenDHCP(ctx context.Context, netns string, lease netsetup.Lease, log *slog.Logger) (DHCPServer, error) {
	s, err := netsetup.ListenDHCP(ctx, netns, lease, log)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// HostQEMU dials QEMU's QMP and guest agent sockets.
type HostQEMU struct{}

// eventBuffer is the QMP event subscription's buffer.
const eventBuffer = 32

// DialQMP connects to QMP at path, learns the peer's host pid, completes
// the handshake and subscribes to every event.
func (HostQEMU) DialQMP(ctx context.Context, path string) (MonitorConn, int, error) {
	nc, err := unixsock.Dial(ctx, path)
	if err != nil {
		return nil, 0, err
	}
	pid, err := peerPID(nc)
	if err != nil {
		nc.Close()
		return nil, 0, fmt.Errorf("QMP %s: %w", path, err)
	}
	conn, err := qmp.NewConn(ctx, nc, path)
	if err != nil {
		return nil, 0, err
	}
	return hostQMP{Conn: conn, sub: conn.Subscribe(eventBuffer)}, pid, nil
}

// DialGuestAgent connects to the guest agent at path.
func (HostQEMU) DialGuestAgent(ctx context.Context, path string) (GuestAgent, error) {
	nc, err := unixsock.Dial(ctx, path)
	if err != nil {
		return nil, err
	}
	return qmp.NewAgent(nc, path), nil
}

// hostQMP is a qmp.Conn with its event subscription.
type hostQMP struct {
	*qmp.Conn
	sub *qmp.Subscription
}

func (c hostQMP) Events() <-chan qmp.Event { return c.sub.Events() }
func (c hostQMP) Dropped() uint64          { return c.sub.Dropped() }

// Close ends the subscription and the connection.
func (c hostQMP) Close() error {
	c.sub.Close()
	return c.Conn.Close()
}

// rawQMP returns the qmp.Conn under a host connection, for the node API
// and the metrics, which speak the whole protocol; nil otherwise.
func rawQMP(m MonitorConn) *qmp.Conn {
	if c, ok := m.(hostQMP); ok {
		return c.Conn
	}
	return nil
}

// rawAgent returns the qmp.Agent under a host guest agent connection.
func rawAgent(ga GuestAgent) *qmp.Agent {
	if a, ok := ga.(*qmp.Agent); ok {
		return a
	}
	return nil
}

// HostProcesses reads /proc and signals host processes.
type HostProcesses struct{}

// Identify is pid's identity: pid, start time, boot id.
func (HostProcesses) Identify(pid int) (store.Process, error) { return processOf(pid) }

// Alive reports whether p still exists (same pid, start time and boot).
func (HostProcesses) Alive(p store.Process) bool { return alive(p) }

// Kill sends SIGKILL to p; a process already gone is not an error, and
// neither is a process that reuses p's pid: it is left alone. The pid is
// pinned with a pidfd before its identity is checked, so it cannot be
// reused between the check and the signal.
func (HostProcesses) Kill(p store.Process) error {
	if p.PID <= 0 {
		return nil
	}
	fd, err := unix.PidfdOpen(p.PID, 0)
	if errors.Is(err, unix.ESRCH) {
		return nil
	}
	if errors.Is(err, unix.ENOSYS) {
		// Kernels before 5.3 have no pidfds: check, then signal the pid.
		if !alive(p) {
			return nil
		}
		if err := unix.Kill(p.PID, unix.SIGKILL); err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("kill QEMU %d: %w", p.PID, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("kill QEMU %d: pidfd: %w", p.PID, err)
	}
	defer unix.Close(fd)
	if !alive(p) {
		return nil // gone, or another process now has its pid
	}
	if err := unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("kill QEMU %d: %w", p.PID, err)
	}
	return nil
}

// withHostDefaults fills the effects left nil with the host's.
func (d Deps) withHostDefaults() Deps {
	if d.Launcher == nil {
		d.Launcher = HostLauncher{}
	}
	if d.Network == nil {
		d.Network = HostNetwork{}
	}
	if d.QEMU == nil {
		d.QEMU = HostQEMU{}
	}
	if d.Processes == nil {
		d.Processes = HostProcesses{}
	}
	if d.Pods == nil {
		d.Pods = NewHostPodWatcher(podfs.LauncherSocket, podfs.RunningFile, podfs.ExitFile)
	}
	return d
}
