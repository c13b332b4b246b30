package netsetup

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"syscall"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// The helpers in this file run with the calling OS thread inside the target
// network namespace (see inNetNS): netlink's package-level functions open a
// fresh socket per request in the thread's current netns.

const dumpRetries = 5

// retryDump retries a netlink dump that the kernel interrupted because the
// table changed while it was being read.
func retryDump[T any](f func() (T, error)) (T, error) {
	var v T
	var err error
	for range dumpRetries {
		v, err = f()
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			return v, err
		}
	}
	return v, err
}

// lookupLink returns the link called name; ok is false when it does not exist.
func lookupLink(name string) (l netlink.Link, ok bool, err error) {
	l, err = netlink.LinkByName(name)
	var nf netlink.LinkNotFoundError
	if errors.As(err, &nf) || errors.Is(err, unix.ENODEV) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("look up link %q: %w", name, err)
	}
	return l, true, nil
}

func mustLink(name string) (netlink.Link, error) {
	l, ok, err := lookupLink(name)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("link %q: %w", name, ErrLinkNotFound)
	}
	return l, nil
}

// ErrLinkNotFound is returned (wrapped) when a link a step depends on is missing.
var ErrLinkNotFound = errors.New("link not found")

// ErrForeignLink is returned (wrapped) when a link with one of our names
// exists but is not what this package would have created.
var ErrForeignLink = errors.New("link exists with unexpected kind or owner")

func ensureBridge(name string, mtu int) (bool, error) {
	l, ok, err := lookupLink(name)
	if err != nil {
		return false, err
	}
	changed := false
	if !ok {
		br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: name, MTU: mtu}}
		if err := netlink.LinkAdd(br); err != nil && !errors.Is(err, unix.EEXIST) {
			return false, fmt.Errorf("create bridge %q: %w", name, err)
		}
		changed = true
		if l, err = mustLink(name); err != nil {
			return false, err
		}
	}
	if l.Type() != "bridge" {
		return false, fmt.Errorf("bridge %q is a %s: %w", name, l.Type(), ErrForeignLink)
	}
	c, err := ensureMTU(l, mtu)
	return changed || c, err
}

func ensureTap(name string, mtu int, uid, gid uint32) (bool, error) {
	l, ok, err := lookupLink(name)
	if err != nil {
		return false, err
	}
	changed := false
	if !ok {
		tap := &netlink.Tuntap{
			LinkAttrs: netlink.LinkAttrs{Name: name},
			Mode:      netlink.TUNTAP_MODE_TAP,
			// Single queue (no IFF_MULTI_QUEUE): QEMU attaches with queues=1
			// and the kernel refuses a multiqueue mismatch. VNET_HDR is a
			// per-fd flag QEMU sets itself when it opens the tap.
			Flags: netlink.TUNTAP_NO_PI | netlink.TUNTAP_VNET_HDR,
			Owner: uid,
			Group: gid,
		}
		if err := netlink.LinkAdd(tap); err != nil && !errors.Is(err, unix.EBUSY) && !errors.Is(err, unix.EEXIST) {
			return false, fmt.Errorf("create tap %q: %w", name, err)
		}
		changed = true
		if l, err = mustLink(name); err != nil {
			return false, err
		}
	}
	t, isTap := l.(*netlink.Tuntap)
	if !isTap || t.Mode != netlink.TUNTAP_MODE_TAP {
		return false, fmt.Errorf("tap %q is a %s: %w", name, l.Type(), ErrForeignLink)
	}
	if t.Owner != uid || t.Group != gid {
		return false, fmt.Errorf("tap %q owned by %d:%d, want %d:%d: %w", name, t.Owner, t.Group, uid, gid, ErrForeignLink)
	}
	c, err := ensureMTU(l, mtu)
	return changed || c, err
}

func ensureMTU(l netlink.Link, mtu int) (bool, error) {
	if mtu == 0 || l.Attrs().MTU == mtu {
		return false, nil
	}
	if err := netlink.LinkSetMTU(l, mtu); err != nil {
		return false, fmt.Errorf("set MTU %d on %q: %w", mtu, l.Attrs().Name, err)
	}
	return true, nil
}

func ensureUp(name string) (bool, error) {
	l, err := mustLink(name)
	if err != nil {
		return false, err
	}
	if l.Attrs().Flags&net.FlagUp != 0 {
		return false, nil
	}
	if err := netlink.LinkSetUp(l); err != nil {
		return false, fmt.Errorf("set %q up: %w", name, err)
	}
	return true, nil
}

func ensureMaster(name, master string) (bool, error) {
	l, err := mustLink(name)
	if err != nil {
		return false, err
	}
	m, err := mustLink(master)
	if err != nil {
		return false, err
	}
	if l.Attrs().MasterIndex == m.Attrs().Index {
		return false, nil
	}
	if err := netlink.LinkSetMaster(l, m); err != nil {
		return false, fmt.Errorf("attach %q to %q: %w", name, master, err)
	}
	return true, nil
}

func ensureAlias(name, alias string) (bool, error) {
	l, err := mustLink(name)
	if err != nil {
		return false, err
	}
	if l.Attrs().Alias == alias {
		return false, nil
	}
	if err := netlink.LinkSetAlias(l, alias); err != nil {
		return false, fmt.Errorf("set alias on %q: %w", name, err)
	}
	return true, nil
}

// ipv4Addrs lists the global-scope IPv4 addresses of l.
func ipv4Addrs(l netlink.Link) ([]netip.Prefix, error) {
	addrs, err := retryDump(func() ([]netlink.Addr, error) { return netlink.AddrList(l, netlink.FAMILY_V4) })
	if err != nil {
		return nil, fmt.Errorf("list addresses of %q: %w", l.Attrs().Name, err)
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

func ensureAddr(name string, p netip.Prefix) (bool, error) {
	l, err := mustLink(name)
	if err != nil {
		return false, err
	}
	addrs, err := retryDump(func() ([]netlink.Addr, error) { return netlink.AddrList(l, netlink.FAMILY_V4) })
	if err != nil {
		return false, fmt.Errorf("list addresses of %q: %w", name, err)
	}
	for _, a := range addrs {
		if q, ok := toPrefix(a.IPNet); ok && q == p {
			return false, nil
		}
	}
	if err := netlink.AddrAdd(l, &netlink.Addr{IPNet: toIPNet(p)}); err != nil && !errors.Is(err, unix.EEXIST) {
		return false, fmt.Errorf("add %s to %q: %w", p, name, err)
	}
	return true, nil
}

func delAddr(l netlink.Link, p netip.Prefix) error {
	err := netlink.AddrDel(l, &netlink.Addr{IPNet: toIPNet(p)})
	if err != nil && !errors.Is(err, unix.EADDRNOTAVAIL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("delete %s from %q: %w", p, l.Attrs().Name, err)
	}
	return nil
}

// podRoutes lists the IPv4 main-table routes through l other than the
// connected routes the kernel derives from its addresses.
func podRoutes(l netlink.Link) ([]podRoute, error) {
	rs, err := retryDump(func() ([]netlink.Route, error) { return netlink.RouteList(l, netlink.FAMILY_V4) })
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

func addRoute(l netlink.Link, r podRoute) error {
	if err := netlink.RouteAdd(r.netlinkRoute(l)); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("add route %s via %v on %q: %w", r.Dst, r.Gw, l.Attrs().Name, err)
	}
	return nil
}

func delRoute(l netlink.Link, r podRoute) error {
	if err := netlink.RouteDel(r.netlinkRoute(l)); err != nil && !errors.Is(err, unix.ESRCH) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("delete route %s via %v on %q: %w", r.Dst, r.Gw, l.Attrs().Name, err)
	}
	return nil
}

func deleteLink(name string) error {
	l, ok, err := lookupLink(name)
	if err != nil || !ok {
		return err
	}
	if err := netlink.LinkDel(l); err != nil && !errors.Is(err, unix.ENODEV) {
		return fmt.Errorf("delete link %q: %w", name, err)
	}
	return nil
}

// ensureSysctl writes val to a /proc/sys file of the thread's netns.
func ensureSysctl(path, val string) (bool, error) {
	cur, err := os.ReadFile(path)
	if err != nil {
		return false, fmt.Errorf("read %s: %w", path, err)
	}
	if string(cur) == val+"\n" || string(cur) == val {
		return false, nil
	}
	if err := os.WriteFile(path, []byte(val), 0o644); err != nil {
		return false, fmt.Errorf("write %s: %w", path, err)
	}
	return true, nil
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

// isGone reports errors meaning "already absent".
func isGone(err error) bool {
	return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENODEV) || errors.Is(err, syscall.ESRCH)
}
