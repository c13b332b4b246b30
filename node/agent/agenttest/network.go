package agenttest

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"

	"github.com/nodevirt/nodevirt/netsetup"
	"github.com/nodevirt/nodevirt/node/agent"
)

// Network is a fake agent.Network: Ensure returns what the plan asks
// for and marks it built (see Built); Release unmarks it.
type Network struct {
	log *Log

	mu     sync.Mutex
	netns  []string
	leases []netsetup.Lease
	built  map[builtKey]bool
}

// builtKey is a plan's network in a netns.
type builtKey struct{ netns, bridge, tap string }

// NewNetwork returns a fake network logging to log.
func NewNetwork(log *Log) *Network { return &Network{log: log} }

// Ensure logs "network.Ensure <tap>".
func (n *Network) Ensure(ctx context.Context, netns string, p netsetup.Plan) (netsetup.Result, error) {
	if err := n.log.call("network.Ensure " + p.Tap); err != nil {
		return netsetup.Result{}, err
	}
	n.mu.Lock()
	n.netns = append(n.netns, netns)
	if n.built == nil {
		n.built = map[builtKey]bool{}
	}
	n.built[builtKey{netns, p.Bridge, p.Tap}] = true
	n.mu.Unlock()
	return netsetup.Result{
		Binding: p.Binding, PodInterface: p.PodInterface, Bridge: p.Bridge, Tap: p.Tap,
		GuestMAC: p.GuestMAC, GuestIP: p.GuestIP, Gateway: p.Gateway.Addr(),
		MTU: p.MTU, DNS: p.DNS, Hostname: p.Hostname,
	}, ctx.Err()
}

// Release logs "network.Release <tap>"; unless it fails, the plan's
// network in netns is no longer built (released already is no error).
func (n *Network) Release(_ context.Context, netns string, p netsetup.Plan) error {
	if err := n.log.call("network.Release " + p.Tap); err != nil {
		return err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.built, builtKey{netns, p.Bridge, p.Tap})
	return nil
}

// Built reports whether Ensure built p's network in netns and Release
// has not removed it since.
func (n *Network) Built(netns string, p netsetup.Plan) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.built[builtKey{netns, p.Bridge, p.Tap}]
}

// Dial logs "network.Dial <network> <address>" and fails: the fake has no
// guests to reach.
func (n *Network) Dial(_ context.Context, _, network, address string) (net.Conn, error) {
	if err := n.log.call("network.Dial " + network + " " + address); err != nil {
		return nil, err
	}
	return nil, errors.New("agenttest: no guest network to dial")
}

// ListenDHCP logs "dhcp.Listen <bridge>" and returns a server that serves
// nothing until it is closed or its context ends.
func (n *Network) ListenDHCP(_ context.Context, _ string, lease netsetup.Lease, _ *slog.Logger) (agent.DHCPServer, error) {
	if err := n.log.call("dhcp.Listen " + lease.Interface); err != nil {
		return nil, err
	}
	n.mu.Lock()
	n.leases = append(n.leases, lease)
	n.mu.Unlock()
	return &dhcpServer{closed: make(chan struct{})}, nil
}

// NetNS returns the netns paths Ensure was called with, in order.
func (n *Network) NetNS() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.netns...)
}

// Leases returns the leases DHCP servers were opened for, in order.
func (n *Network) Leases() []netsetup.Lease {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]netsetup.Lease(nil), n.leases...)
}

type dhcpServer struct {
	once   sync.Once
	closed chan struct{}
}

func (s *dhcpServer) Serve(ctx context.Context) error {
	select {
	case <-ctx.Done():
	case <-s.closed:
	}
	return nil
}

func (s *dhcpServer) Close() error {
	s.once.Do(func() { close(s.closed) })
	return nil
}
