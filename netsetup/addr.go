package netsetup

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Addresses and routes of links in a pod netns, through its rtnl (link.go).

// ipv4Addrs lists the global-scope IPv4 addresses of l.
func (rt rtnl) ipv4Addrs(l netlink.Link) ([]netip.Prefix, error) {
	addrs, err := rt.addrList(l)
	if err != nil {
		return nil, err
	}
	var out []netip.Prefix
	for _, a := range addrs {
		if a.Scope != int(netlink.SCOPE_UNIVERSE) {
			continue
		}
		if p, ok := toPrefix(a.IPNet); ok {
			out = append(out, p)
		}
	}
	return out, nil
}

// addrList lists the IPv4 addresses of l (see rtnl for why it remembers).
func (rt rtnl) addrList(l netlink.Link) ([]netlink.Addr, error) {
	if addrs, ok := rt.addrs[l.Attrs().Index]; ok {
		return addrs, nil
	}
	addrs, err := retryDump(func() ([]netlink.Addr, error) { return rt.h.AddrList(l, netlink.FAMILY_V4) })
	if err != nil {
		return nil, fmt.Errorf("list addresses of %q: %w", l.Attrs().Name, err)
	}
	rt.addrs[l.Attrs().Index] = addrs
	return addrs, nil
}

func (rt rtnl) ensureAddr(name string, p netip.Prefix) (bool, error) {
	l, err := rt.mustLink(name)
	if err != nil {
		return false, err
	}
	addrs, err := rt.addrList(l)
	if err != nil {
		return false, err
	}
	for _, a := range addrs {
		if q, ok := toPrefix(a.IPNet); ok && q == p {
			return false, nil
		}
	}
	rt.changing()
	if err := rt.h.AddrAdd(l, &netlink.Addr{IPNet: toIPNet(p)}); err != nil && !errors.Is(err, unix.EEXIST) {
		return false, fmt.Errorf("add %s to %q: %w", p, name, err)
	}
	return true, nil
}

func (rt rtnl) delAddr(l netlink.Link, p netip.Prefix) error {
	rt.changing()
	err := rt.h.AddrDel(l, &netlink.Addr{IPNet: toIPNet(p)})
	if err != nil && !errors.Is(err, unix.EADDRNOTAVAIL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("delete %s from %q: %w", p, l.Attrs().Name, err)
	}
	return nil
}

// podRoutes lists the IPv4 main-table routes through l other than the
// connected routes the kernel derives from its addresses.
func (rt rtnl) podRoutes(l netlink.Link) ([]podRoute, error) {
	rs, err := retryDump(func() ([]netlink.Route, error) { return rt.h.RouteList(l, netlink.FAMILY_V4) })
	if err != nil {
		return nil, fmt.Errorf("list routes of %q: %w", l.Attrs().Name, err)
	}
	var out []podRoute
	for _, r := range rs {
		if r.Protocol == unix.RTPROT_KERNEL || r.Table != unix.RT_TABLE_MAIN {
			continue
		}
		pr := podRoute{Dst: netip.MustParsePrefix("0.0.0.0/0"), Scope: uint8(r.Scope)}
		if r.Dst != nil {
			if pr.Dst, _ = toPrefix(r.Dst); !pr.Dst.IsValid() {
				continue
			}
		}
		if gw, ok := netip.AddrFromSlice(r.Gw); ok {
			pr.Gw = gw.Unmap()
		}
		out = append(out, pr)
	}
	return out, nil
}

func (r podRoute) netlinkRoute(l netlink.Link) *netlink.Route {
	nr := &netlink.Route{LinkIndex: l.Attrs().Index, Dst: toIPNet(r.Dst), Scope: netlink.Scope(r.Scope)}
	if r.Gw.IsValid() {
		nr.Gw = r.Gw.AsSlice()
	}
	return nr
}

func (rt rtnl) addRoute(l netlink.Link, r podRoute) error {
	rt.changing()
	if err := rt.h.RouteAdd(r.netlinkRoute(l)); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("add route %s via %v on %q: %w", r.Dst, r.Gw, l.Attrs().Name, err)
	}
	return nil
}

func (rt rtnl) delRoute(l netlink.Link, r podRoute) error {
	rt.changing()
	if err := rt.h.RouteDel(r.netlinkRoute(l)); err != nil && !errors.Is(err, unix.ESRCH) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("delete route %s via %v on %q: %w", r.Dst, r.Gw, l.Attrs().Name, err)
	}
	return nil
}

func toPrefix(n *net.IPNet) (netip.Prefix, bool) {
	if n == nil {
		return netip.Prefix{}, false
	}
	a, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	a = a.Unmap()
	ones, bits := n.Mask.Size()
	if bits == 0 || (a.Is4() && bits != 32) {
		return netip.Prefix{}, false
	}
	return netip.PrefixFrom(a, ones), true
}

func toIPNet(p netip.Prefix) *net.IPNet {
	bits := 32
	if p.Addr().Is6() {
		bits = 128
	}
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), bits)}
}
