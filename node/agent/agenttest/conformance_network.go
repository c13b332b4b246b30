package agenttest

import (
	"reflect"
	"testing"
	"time"

	"github.com/nodevirt/nodevirt/netsetup"
	"github.com/nodevirt/nodevirt/node/agent"
)

// NetworkEnv is an agent.Network with a pod netns to build in.
type NetworkEnv struct {
	Network agent.Network
	// NetNS is the pod netns path: its pod interface has an IPv4 address
	// and a default route, and nothing of Plan is built yet.
	NetNS string
	Plan  netsetup.Plan
	// Built reports whether what Ensure builds for Plan (its bridge and
	// tap) is in NetNS.
	Built func(t *testing.T) bool
}

// TestNetwork checks n: Ensure builds the plan's bridge and tap and
// returns them with the plan's binding, pod interface and guest MAC (and,
// for masquerade, its guest address and gateway); Ensure again returns
// the same result; Release removes what Ensure built, and Release again
// is no error.
func TestNetwork(t *testing.T, env NetworkEnv) {
	n, p := env.Network, env.Plan
	if env.Built(t) {
		t.Fatalf("plan (bridge %q, tap %q) built before Ensure", p.Bridge, p.Tap)
	}
	first, err := n.Ensure(ctxFor(t, waitTimeout), env.NetNS, p)
	if err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	if !env.Built(t) {
		t.Errorf("after Ensure, the plan's bridge %q and tap %q are not built", p.Bridge, p.Tap)
	}
	checkResult(t, first, p)

	second, err := n.Ensure(ctxFor(t, waitTimeout), env.NetNS, p)
	if err != nil {
		t.Fatalf("Ensure again: %v", err)
	}
	if len(second.Changed) != 0 {
		t.Errorf("Ensure again changed %v, want nothing", second.Changed)
	}
	first.Changed, second.Changed = nil, nil
	if !reflect.DeepEqual(first, second) {
		t.Errorf("Ensure again = %+v, want the first result %+v", second, first)
	}

	if err := n.Release(ctxFor(t, waitTimeout), env.NetNS, p); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if env.Built(t) {
		t.Errorf("after Release, the plan's bridge %q or tap %q is still there", p.Bridge, p.Tap)
	}
	if err := n.Release(ctxFor(t, 5*time.Second), env.NetNS, p); err != nil {
		t.Errorf("Release again: %v", err)
	}
}

// checkResult checks the parts of r the plan p determines.
func checkResult(t *testing.T, r netsetup.Result, p netsetup.Plan) {
	t.Helper()
	if r.Binding != p.Binding || r.PodInterface != p.PodInterface || r.Bridge != p.Bridge || r.Tap != p.Tap ||
		r.GuestMAC.String() != p.GuestMAC.String() {
		t.Errorf("Ensure = %+v, want the plan's binding %s, pod interface %q, bridge %q, tap %q, guest MAC %s",
			r, p.Binding, p.PodInterface, p.Bridge, p.Tap, p.GuestMAC)
	}
	if p.Binding == netsetup.Masquerade && (r.GuestIP != p.GuestIP || r.Gateway != p.Gateway.Addr()) {
		t.Errorf("Ensure guest IP %s, gateway %s; want the plan's %s, %s", r.GuestIP, r.Gateway, p.GuestIP, p.Gateway.Addr())
	}
	if p.MTU != 0 && r.MTU != p.MTU {
		t.Errorf("Ensure MTU %d, want the plan's %d", r.MTU, p.MTU)
	}
}
