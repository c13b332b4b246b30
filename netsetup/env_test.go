package netsetup

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/google/nftables"
	"github.com/vishvananda/netlink"

	"github.com/nodevirt/nodevirt/hack/testenv"
)

// Test topology (all in throwaway netns named nvt-<rand>-*):
//
//	node netns                pod netns
//	veth "nodeside"  <------> "eth0" 10.200.0.2/24, default via 10.200.0.1
//	10.200.0.1/24
const (
	nodeIP = "10.200.0.1"
	podIP  = "10.200.0.2"
)

func requireRoot(t testing.TB) {
	t.Helper()
	_, err := exec.LookPath("ip")
	testenv.Require(t, os.Geteuid() == 0, "root (netns, netlink, nftables)", "test-netsetup")
	testenv.Require(t, err == nil, "the ip command (iproute2)", "netsetup-deps")
}

type topo struct {
	prefix  string
	pod     string // netns path of the "pod"
	node    string // netns path of the "node"
	podName string
}

func run(t testing.TB, args ...string) {
	t.Helper()
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// addNetNS creates a named netns and deletes it in t.Cleanup.
func addNetNS(t testing.TB, name string) string {
	t.Helper()
	run(t, "ip", "netns", "add", name)
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("delete netns %s: %v\n%s", name, err, out)
		}
	})
	return filepath.Join("/run/netns", name)
}

func newTopo(t testing.TB) *topo {
	t.Helper()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	p := "nvt-" + hex.EncodeToString(b)
	tp := &topo{prefix: p, podName: p + "-pod"}
	tp.pod = addNetNS(t, p+"-pod")
	tp.node = addNetNS(t, p+"-node")
	run(t, "ip", "-n", p+"-node", "link", "add", "nodeside", "type", "veth", "peer", "name", "eth0", "netns", p+"-pod")
	run(t, "ip", "-n", p+"-node", "addr", "add", nodeIP+"/24", "dev", "nodeside")
	run(t, "ip", "-n", p+"-node", "link", "set", "nodeside", "up")
	run(t, "ip", "-n", p+"-node", "link", "set", "lo", "up")
	run(t, "ip", "-n", p+"-pod", "link", "set", "lo", "up")
	run(t, "ip", "-n", p+"-pod", "addr", "add", podIP+"/24", "dev", "eth0")
	run(t, "ip", "-n", p+"-pod", "link", "set", "eth0", "up")
	run(t, "ip", "-n", p+"-pod", "route", "add", "default", "via", nodeIP)
	return tp
}

// fakeGuest adds a netns standing in for the guest: a veth whose pod end is
// attached to the plan's bridge, with the guest MAC on the guest end.
func (tp *topo) fakeGuest(t *testing.T, plan Plan) string {
	t.Helper()
	name := tp.prefix + "-guest"
	path := addNetNS(t, name)
	run(t, "ip", "-n", tp.podName, "link", "add", "fakeguest", "type", "veth", "peer", "name", "eth0", "netns", name)
	run(t, "ip", "-n", tp.podName, "link", "set", "fakeguest", "master", plan.Bridge, "up")
	run(t, "ip", "-n", name, "link", "set", "eth0", "address", plan.GuestMAC.String(), "up")
	run(t, "ip", "-n", name, "link", "set", "lo", "up")
	t.Cleanup(func() { _ = exec.Command("ip", "-n", tp.podName, "link", "del", "fakeguest").Run() })
	return path
}

func inNS(t *testing.T, path string, f func() error) {
	t.Helper()
	if err := ns.WithNetNSPath(path, func(ns.NetNS) error { return f() }); err != nil {
		t.Fatal(err)
	}
}

// netState is what tests compare before/after: links, addresses, routes
// and nftables tables of one netns (MACs and indexes left out: the kernel
// picks them).
type netState struct {
	Links  []string
	Addrs  []string
	Routes []string
	Tables []string
}

func snapshot(t *testing.T, path string) netState {
	t.Helper()
	var s netState
	inNS(t, path, func() error {
		links, err := retryDump(netlink.LinkList)
		if err != nil {
			return err
		}
		names := map[int]string{}
		for _, l := range links {
			names[l.Attrs().Index] = l.Attrs().Name
		}
		for _, l := range links {
			a := l.Attrs()
			up := a.Flags&net.FlagUp != 0
			s.Links = append(s.Links, fmt.Sprintf("%s type=%s master=%s mtu=%d up=%v alias=%q", a.Name, l.Type(), names[a.MasterIndex], a.MTU, up, a.Alias))
			addrs, err := retryDump(func() ([]netlink.Addr, error) { return netlink.AddrList(l, netlink.FAMILY_ALL) })
			if err != nil {
				return err
			}
			for _, ad := range addrs {
				if p, ok := toPrefix(ad.IPNet); ok && !p.Addr().IsLinkLocalUnicast() {
					s.Addrs = append(s.Addrs, a.Name+" "+p.String())
				}
			}
		}
		routes, err := retryDump(func() ([]netlink.Route, error) { return netlink.RouteList(nil, netlink.FAMILY_V4) })
		if err != nil {
			return err
		}
		for _, r := range routes {
			s.Routes = append(s.Routes, fmt.Sprintf("%v via %v dev %s scope %d", r.Dst, r.Gw, names[r.LinkIndex], r.Scope))
		}
		c, err := nftables.New()
		if err != nil {
			return err
		}
		tables, err := c.ListTables()
		if err != nil {
			return err
		}
		for _, tb := range tables {
			s.Tables = append(s.Tables, fmt.Sprintf("%d/%s", tb.Family, tb.Name))
		}
		return nil
	})
	slices.Sort(s.Links)
	slices.Sort(s.Addrs)
	slices.Sort(s.Routes)
	slices.Sort(s.Tables)
	return s
}

func mustPlan(t testing.TB, in Input) Plan {
	t.Helper()
	p, err := NewPlan(in)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
