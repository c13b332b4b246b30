package agent

import (
	"context"
	"io"
	"log/slog"
	"net"

	"github.com/nodevirt/nodevirt/netsetup"
	"github.com/nodevirt/nodevirt/node/launcher"
	"github.com/nodevirt/nodevirt/node/launchspec"
	"github.com/nodevirt/nodevirt/node/migration"
	"github.com/nodevirt/nodevirt/qmp"
	"github.com/nodevirt/nodevirt/store"
)

// The agent's effects on the host go through these interfaces, so that
// sync can be tested without root, QEMU or launchers (fakes live in
// node/agent/agenttest). The host implementations (host.go) are the
// defaults: HostLauncher, HostNetwork, HostQEMU, HostProcesses.

// Launcher is the launcher of a pod, reached through its control socket.
type Launcher interface {
	// Status asks the launcher listening at socket for its state.
	Status(ctx context.Context, socket string) (launcher.Status, error)
	// Launch hands spec to the launcher; a launcher running another spec
	// fails with launcher.ErrConflict (wrapped).
	Launch(ctx context.Context, socket string, spec launchspec.Spec) error
	// PID is the launcher's host pid (its netns is the pod's).
	PID(ctx context.Context, socket string) (int, error)
}

// Network builds and tears down a VMI's network inside a pod netns.
type Network interface {
	Ensure(ctx context.Context, netns string, p netsetup.Plan) (netsetup.Result, error)
	Release(ctx context.Context, netns string, p netsetup.Plan) error
	// ListenDHCP opens a DHCP server for lease in netns; it serves once
	// its Serve is called.
	ListenDHCP(ctx context.Context, netns string, lease netsetup.Lease, log *slog.Logger) (DHCPServer, error)
	// Dial connects to address over network ("tcp", "udp") from inside
	// netns (port-forward to a guest).
	Dial(ctx context.Context, netns, network, address string) (net.Conn, error)
}

// DHCPServer serves one guest its lease until ctx ends or it is closed.
type DHCPServer interface {
	Serve(ctx context.Context) error
	Close() error
}

// Monitor is the QMP commands the reconcile and pause use.
type Monitor interface {
	QueryStatus(ctx context.Context) (qmp.StatusInfo, error)
	Stop(ctx context.Context) error
	Cont(ctx context.Context) error
	SystemPowerdown(ctx context.Context) error
	Quit(ctx context.Context) error
}

// EventStream is a QMP connection's events, subscribed to when it was
// dialed (before any command, so no state change is missed).
type EventStream interface {
	Events() <-chan qmp.Event
	// Dropped counts the events lost to a full buffer.
	Dropped() uint64
}

// MonitorConn is one QMP connection: its commands, its events, its end.
type MonitorConn interface {
	Monitor
	EventStream
	Done() <-chan struct{}
	Close() error
}

// GuestAgent is what the agent's probes use of a guest agent connection.
type GuestAgent interface {
	Ping(ctx context.Context) error
	OSInfo(ctx context.Context) (qmp.OSInfo, error)
	NetworkInterfaces(ctx context.Context) ([]qmp.NetworkInterface, error)
	Done() <-chan struct{}
	Close() error
}

// QEMUDialer connects to a QEMU's sockets.
type QEMUDialer interface {
	// DialQMP connects to the QMP socket at path, completes the
	// handshake, subscribes to events and returns the connection with
	// the host pid of the process at the other end (SO_PEERCRED).
	DialQMP(ctx context.Context, path string) (MonitorConn, int, error)
	// DialGuestAgent connects to the guest agent socket at path.
	DialGuestAgent(ctx context.Context, path string) (GuestAgent, error)
}

// Processes identifies, checks and kills host processes (QEMU).
type Processes interface {
	// Identify returns the identity of the live process pid (pid, start
	// time, boot), so that a reused pid is never mistaken for it.
	Identify(pid int) (store.Process, error)
	// Alive reports whether the process p still exists.
	Alive(p store.Process) bool
	// Kill sends SIGKILL to p; a process already gone is not an error.
	Kill(p store.Process) error
}

// Migrator is the QMP commands of a live migration (the host connection,
// a *qmp.Conn, has them).
type Migrator interface {
	Monitor
	QueryMigrate(ctx context.Context) (qmp.MigrationInfo, error)
	Migrate(ctx context.Context, uri string) error
	MigrateIncoming(ctx context.Context, uri string) error
	MigrateCancel(ctx context.Context) error
	MigrateSetCapabilities(ctx context.Context, caps ...qmp.MigrationCapability) error
	MigrateSetParameters(ctx context.Context, p qmp.MigrationParameters) error
	QueryKVM(ctx context.Context) (qmp.KVMInfo, error)
}

// PodWatcher reports files created in pods' sockets directories (the
// launcher's socket, QEMU's running and exit files), so that a VMI is
// synced as soon as its launcher or QEMU changes state rather than at the
// next poll.
type PodWatcher interface {
	// Watch reports the files created in dir as events of uid, and dir's
	// creation when it does not exist yet; another dir for the same uid
	// replaces the old one.
	Watch(uid, dir string) error
	// Unwatch stops the events of uid.
	Unwatch(uid string)
	// Events carries the UIDs with news until Close.
	Events() <-chan string
	Close() error
}

// MigrationChannel opens the source end of the agents' migration channel
// for one migration: a unix socket at path (in the pod's sockets dir) that
// QEMU migrates to, forwarded over mutual TLS (node/migration). Closing it
// cuts the streams.
type MigrationChannel interface {
	Listen(path string, route migration.Route) (io.Closer, error)
}

// MigrationDialer is the host MigrationChannel.
type MigrationDialer struct{ migration.Dialer }

// Listen opens the proxy socket of route at path.
func (d MigrationDialer) Listen(path string, route migration.Route) (io.Closer, error) {
	p, err := d.Dialer.Listen(path, route)
	if err != nil {
		return nil, err
	}
	return p, nil
}
