package netsetup

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
)

// ErrNoPodAddress is returned (wrapped) when the pod interface has no IPv4
// address to NAT to or to hand to the guest.
var ErrNoPodAddress = errors.New("pod interface has no IPv4 address")

// Result is what Ensure found and built; the agent stores it and reports
// status.interfaces from it.
type Result struct {
	Binding      Binding
	PodInterface string
	Bridge       string
	Tap          string
	GuestMAC     net.HardwareAddr
	// PodIP is the pod interface's address (for bridge binding it is the
	// address the guest now owns).
	PodIP netip.Prefix
	// GuestIP is the address the guest gets by DHCP: the masquerade guest
	// address (10.0.2.2/24) or, for bridge binding, PodIP.
	GuestIP netip.Prefix
	// Gateway is the guest's default gateway (zero if the pod has none).
	Gateway  netip.Addr
	MTU      int
	DNS      DNS
	Hostname string
	// Changed lists the steps that modified the netns in this call; empty
	// when everything was already in place.
	Changed []string
}

// Lease is what the DHCP server hands to the guest.
func (r Result) Lease() Lease {
	l := Lease{
		Interface: r.Bridge,
		ClientMAC: r.GuestMAC,
		ClientIP:  r.GuestIP,
		Router:    r.Gateway,
		DNS:       r.DNS.IPv4Servers(),
		Search:    r.DNS.Search,
		Hostname:  r.Hostname,
		MTU:       r.MTU,
	}
	if r.Binding == Masquerade {
		l.ServerIP = r.Gateway
	} else {
		l.ServerIP = bridgeModeServerIP.Addr()
	}
	return l
}

// Ensure builds (or finds already built) the network of plan in the netns at
// netnsPath and returns what is there. It is idempotent: every step checks
// before it acts, so it converges from any partial state, including one
// left by a crash mid-way, and a second call reports no Changed steps.
func Ensure(ctx context.Context, netnsPath string, plan Plan) (Result, error) {
	return ensureSteps(ctx, netnsPath, plan, -1)
}

// ensureSteps runs the first k steps (all when k < 0).
func ensureSteps(ctx context.Context, netnsPath string, plan Plan, k int) (Result, error) {
	all := steps(plan)
	if k >= 0 && k < len(all) {
		all = all[:k]
	}
	wrap := func(err error) error {
		return fmt.Errorf("ensure %s network (bridge %q, tap %q): %w", plan.Binding, plan.Bridge, plan.Tap, err)
	}
	ps, err := openPodSockets(ctx, netnsPath, stepSysctls(plan))
	if err != nil {
		return Result{}, wrap(err)
	}
	defer ps.close()
	st := &state{plan: plan, podSockets: ps}
	if err := runSteps(ctx, st, all); err != nil {
		return Result{}, wrap(err)
	}
	return st.result(), nil
}

// runSteps runs steps in order through the pod netns's sockets and
// records in st which of them changed something.
func runSteps(ctx context.Context, st *state, all []step) error {
	for _, s := range all {
		if err := ctx.Err(); err != nil {
			return err
		}
		changed, err := s.run(st)
		if err != nil {
			return fmt.Errorf("step %s: %w", s.name, err)
		}
		if changed {
			st.changed = append(st.changed, s.name)
		}
	}
	return nil
}

// state is shared by the steps of one Ensure call.
type state struct {
	plan Plan
	*podSockets
	mtu     int
	pod     podConfig
	changed []string
}

func (st *state) result() Result {
	p := st.plan
	r := Result{
		Binding:      p.Binding,
		PodInterface: p.PodInterface,
		Bridge:       p.Bridge,
		Tap:          p.Tap,
		GuestMAC:     p.GuestMAC,
		PodIP:        st.pod.Addr,
		MTU:          st.mtu,
		DNS:          p.DNS,
		Hostname:     p.Hostname,
		Changed:      st.changed,
	}
	if p.Binding == Masquerade {
		r.GuestIP = p.GuestIP
		r.Gateway = p.Gateway.Addr()
	} else {
		r.GuestIP = st.pod.Addr
		r.Gateway, _ = st.pod.gateway()
	}
	return r
}
