package netsetup

import (
	"errors"
	"fmt"
	"net"
	"syscall"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// rtnl is one rtnetlink socket in a pod netns, opened for the length of
// one Ensure (openPodSockets) or Release (withRTNL). netlink's package-level
// functions would open (and register with the poller, and size a 64 KiB
// buffer for) a fresh socket per request; a converged Ensure makes a dozen
// requests, and the agent runs one per VM when it re-adopts a node's VMs.
//
// A converged Ensure reads the same few links many times, one step after
// the other (each step checks its own link, master or address), so rtnl
// remembers what it read until it changes something: every change made
// through it forgets all it read, and the next step reads afresh.
type rtnl struct {
	h     *netlink.Handle
	links map[string]netlink.Link // by name
	addrs map[int][]netlink.Addr  // IPv4 addresses by link index
	// enter runs f on a thread switched into the socket's netns, for what
	// the socket alone cannot do there: creating a tap (the kernel puts it
	// in the netns of the thread that opened /dev/net/tun).
	enter func(f func() error) error
}

// changing is called before every change made through rt.h: what rt read
// before may no longer hold.
func (rt rtnl) changing() {
	clear(rt.links)
	clear(rt.addrs)
}

// openRTNL opens an rtnetlink socket in the calling thread's netns (see
// inNetNS); the socket keeps that netns whichever thread uses it later.
// enter runs a function on a thread in that netns (rtnl.enter).
func openRTNL(enter func(f func() error) error) (rtnl, error) {
	h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return rtnl{}, fmt.Errorf("open rtnetlink socket: %w", err)
	}
	return rtnl{h: h, links: map[string]netlink.Link{}, addrs: map[int][]netlink.Addr{}, enter: enter}, nil
}

// close closes the socket (a zero rtnl has none).
func (rt rtnl) close() {
	if rt.h != nil {
		rt.h.Close()
	}
}

// withRTNL runs f on the calling thread with an rtnetlink socket of its
// netns (see inNetNS), closed when f returns.
func withRTNL(f func(rtnl) error) error {
	rt, err := openRTNL(func(f func() error) error { return f() })
	if err != nil {
		return err
	}
	defer rt.close()
	return f(rt)
}

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
func (rt rtnl) lookupLink(name string) (l netlink.Link, ok bool, err error) {
	if l, ok := rt.links[name]; ok {
		return l, true, nil
	}
	l, err = rt.h.LinkByName(name)
	var nf netlink.LinkNotFoundError
	if errors.As(err, &nf) || errors.Is(err, unix.ENODEV) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("look up link %q: %w", name, err)
	}
	rt.links[name] = l
	return l, true, nil
}

func (rt rtnl) mustLink(name string) (netlink.Link, error) {
	l, ok, err := rt.lookupLink(name)
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

func (rt rtnl) ensureBridge(name string, mtu int) (bool, error) {
	l, ok, err := rt.lookupLink(name)
	if err != nil {
		return false, err
	}
	changed := false
	if !ok {
		br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: name, MTU: mtu}}
		rt.changing()
		if err := rt.h.LinkAdd(br); err != nil && !errors.Is(err, unix.EEXIST) {
			return false, fmt.Errorf("create bridge %q: %w", name, err)
		}
		changed = true
		if l, err = rt.mustLink(name); err != nil {
			return false, err
		}
	}
	if l.Type() != "bridge" {
		return false, fmt.Errorf("bridge %q is a %s: %w", name, l.Type(), ErrForeignLink)
	}
	c, err := rt.ensureMTU(l, mtu)
	return changed || c, err
}

func (rt rtnl) ensureTap(name string, mtu int, uid, gid uint32) (bool, error) {
	l, ok, err := rt.lookupLink(name)
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
		rt.changing()
		err := rt.enter(func() error { return rt.h.LinkAdd(tap) })
		if err != nil && !errors.Is(err, unix.EBUSY) && !errors.Is(err, unix.EEXIST) {
			return false, fmt.Errorf("create tap %q: %w", name, err)
		}
		changed = true
		if l, err = rt.mustLink(name); err != nil {
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
	c, err := rt.ensureMTU(l, mtu)
	return changed || c, err
}

func (rt rtnl) ensureMTU(l netlink.Link, mtu int) (bool, error) {
	if mtu == 0 || l.Attrs().MTU == mtu {
		return false, nil
	}
	rt.changing()
	if err := rt.h.LinkSetMTU(l, mtu); err != nil {
		return false, fmt.Errorf("set MTU %d on %q: %w", mtu, l.Attrs().Name, err)
	}
	return true, nil
}

func (rt rtnl) ensureUp(name string) (bool, error) {
	l, err := rt.mustLink(name)
	if err != nil {
		return false, err
	}
	if l.Attrs().Flags&net.FlagUp != 0 {
		return false, nil
	}
	rt.changing()
	if err := rt.h.LinkSetUp(l); err != nil {
		return false, fmt.Errorf("set %q up: %w", name, err)
	}
	return true, nil
}

func (rt rtnl) ensureMaster(name, master string) (bool, error) {
	l, err := rt.mustLink(name)
	if err != nil {
		return false, err
	}
	m, err := rt.mustLink(master)
	if err != nil {
		return false, err
	}
	if l.Attrs().MasterIndex == m.Attrs().Index {
		return false, nil
	}
	rt.changing()
	if err := rt.h.LinkSetMaster(l, m); err != nil {
		return false, fmt.Errorf("attach %q to %q: %w", name, master, err)
	}
	return true, nil
}

func (rt rtnl) ensureAlias(name, alias string) (bool, error) {
	l, err := rt.mustLink(name)
	if err != nil {
		return false, err
	}
	if l.Attrs().Alias == alias {
		return false, nil
	}
	rt.changing()
	if err := rt.h.LinkSetAlias(l, alias); err != nil {
		return false, fmt.Errorf("set alias on %q: %w", name, err)
	}
	return true, nil
}

func (rt rtnl) deleteLink(name string) error {
	l, ok, err := rt.lookupLink(name)
	if err != nil || !ok {
		return err
	}
	rt.changing()
	if err := rt.h.LinkDel(l); err != nil && !errors.Is(err, unix.ENODEV) {
		return fmt.Errorf("delete link %q: %w", name, err)
	}
	return nil
}

// isGone reports errors meaning "already absent".
func isGone(err error) bool {
	return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENODEV) || errors.Is(err, syscall.ESRCH)
}
