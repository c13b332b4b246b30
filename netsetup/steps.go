package netsetup

import (
	"fmt"

	"github.com/vishvananda/netlink"
)

// step is one idempotent action of Ensure. run reports whether it changed
// anything. Steps run in order inside the pod netns; a crash between any
// two leaves a state the next Ensure converges from.
type step struct {
	name string
	run  func(*state) (bool, error)
}

func steps(p Plan) []step {
	if p.Binding == Bridge {
		return bridgeSteps(p)
	}
	return masqueradeSteps(p)
}

func masqueradeSteps(p Plan) []step {
	return []step{
		{"observe-pod", observeMasqueradePod},
		{"bridge", func(st *state) (bool, error) { return st.rt.ensureBridge(p.Bridge, st.mtu) }},
		{"bridge-addr", func(st *state) (bool, error) { return st.rt.ensureAddr(p.Bridge, p.Gateway) }},
		{"bridge-up", func(st *state) (bool, error) { return st.rt.ensureUp(p.Bridge) }},
		{"tap", func(st *state) (bool, error) { return st.rt.ensureTap(p.Tap, st.mtu, p.UID, p.GID) }},
		{"tap-master", func(st *state) (bool, error) { return st.rt.ensureMaster(p.Tap, p.Bridge) }},
		{"tap-up", func(st *state) (bool, error) { return st.rt.ensureUp(p.Tap) }},
		{"ip-forward", func(st *state) (bool, error) {
			f, err := st.sysctl(ipForward)
			if err != nil {
				return false, err
			}
			return f.ensure("1")
		}},
		{"nat", func(st *state) (bool, error) {
			return ensureNAT(st.nft, natRules{podIface: p.PodInterface, podIP: st.pod.Addr.Addr(), guestIP: p.GuestIP.Addr(), ports: p.Ports})
		}},
	}
}

// stepSysctls are the /proc/sys files p's steps check, opened with the
// sockets before they run (openPodSockets).
func stepSysctls(p Plan) []string {
	if p.Binding == Masquerade {
		return []string{ipForward}
	}
	return nil
}

func bridgeSteps(p Plan) []step {
	return []step{
		{"observe-pod", observeBridgePod},
		{"bridge", func(st *state) (bool, error) { return st.rt.ensureBridge(p.Bridge, st.mtu) }},
		{"bridge-record", func(st *state) (bool, error) {
			alias, err := st.pod.encode()
			if err != nil {
				return false, err
			}
			return st.rt.ensureAlias(p.Bridge, alias)
		}},
		{"bridge-addr", func(st *state) (bool, error) { return st.rt.ensureAddr(p.Bridge, bridgeModeServerIP) }},
		{"bridge-up", func(st *state) (bool, error) { return st.rt.ensureUp(p.Bridge) }},
		{"tap", func(st *state) (bool, error) { return st.rt.ensureTap(p.Tap, st.mtu, p.UID, p.GID) }},
		{"tap-master", func(st *state) (bool, error) { return st.rt.ensureMaster(p.Tap, p.Bridge) }},
		{"tap-up", func(st *state) (bool, error) { return st.rt.ensureUp(p.Tap) }},
		{"pod-strip", stripPod},
		{"pod-master", func(st *state) (bool, error) { return st.rt.ensureMaster(p.PodInterface, p.Bridge) }},
		{"pod-up", func(st *state) (bool, error) { return st.rt.ensureUp(p.PodInterface) }},
	}
}

func observeMasqueradePod(st *state) (bool, error) {
	l, err := st.rt.mustLink(st.plan.PodInterface)
	if err != nil {
		return false, err
	}
	st.mtu = effectiveMTU(st.plan, l)
	addrs, err := st.rt.ipv4Addrs(l)
	if err != nil {
		return false, err
	}
	if len(addrs) == 0 {
		return false, fmt.Errorf("%q: %w", st.plan.PodInterface, ErrNoPodAddress)
	}
	st.pod = podConfig{Addr: addrs[0]}
	if vm := st.plan.Gateway.Masked(); vm.Overlaps(addrs[0].Masked()) {
		return false, fmt.Errorf("%w: vmNetworkCIDR %s overlaps the pod network %s", ErrInvalidInput, vm, addrs[0].Masked())
	}
	return false, nil
}

// observeBridgePod finds the pod IP configuration: from the record on our
// bridge if an earlier Ensure wrote one (the pod interface may already be
// stripped), else from the pod interface itself.
func observeBridgePod(st *state) (bool, error) {
	l, err := st.rt.mustLink(st.plan.PodInterface)
	if err != nil {
		return false, err
	}
	st.mtu = effectiveMTU(st.plan, l)
	if c, ok, err := st.rt.recordedPodConfig(st.plan.Bridge); err != nil || ok {
		st.pod = c
		return false, err
	}
	addrs, err := st.rt.ipv4Addrs(l)
	if err != nil {
		return false, err
	}
	if len(addrs) == 0 {
		return false, fmt.Errorf("%q: %w", st.plan.PodInterface, ErrNoPodAddress)
	}
	routes, err := st.rt.podRoutes(l)
	if err != nil {
		return false, err
	}
	st.pod = podConfig{Addr: addrs[0], Routes: routes}
	return false, nil
}

func (rt rtnl) recordedPodConfig(bridge string) (podConfig, bool, error) {
	br, ok, err := rt.lookupLink(bridge)
	if err != nil || !ok || br.Attrs().Alias == "" {
		return podConfig{}, false, err
	}
	c, err := decodePodConfig(br.Attrs().Alias)
	if err != nil {
		return podConfig{}, false, fmt.Errorf("bridge %q: %w", bridge, err)
	}
	return c, true, nil
}

func effectiveMTU(p Plan, pod netlink.Link) int {
	if p.MTU > 0 {
		return p.MTU
	}
	return pod.Attrs().MTU
}

// stripPod removes the recorded routes and all IPv4 addresses from the pod
// interface: the guest owns them now.
func stripPod(st *state) (bool, error) {
	l, err := st.rt.mustLink(st.plan.PodInterface)
	if err != nil {
		return false, err
	}
	routes, err := st.rt.podRoutes(l)
	if err != nil {
		return false, err
	}
	addrs, err := st.rt.ipv4Addrs(l)
	if err != nil {
		return false, err
	}
	// Gateway routes first: the kernel refuses nothing here, but deleting
	// them before the address keeps the order the reverse of restore.
	for _, r := range routes {
		if err := st.rt.delRoute(l, r); err != nil {
			return false, err
		}
	}
	for _, a := range addrs {
		if err := st.rt.delAddr(l, a); err != nil {
			return false, err
		}
	}
	return len(routes)+len(addrs) > 0, nil
}
