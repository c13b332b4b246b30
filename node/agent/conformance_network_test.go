package agent_test

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodevirt/nodevirt/hack/testenv"
	"github.com/nodevirt/nodevirt/netsetup"
	"github.com/nodevirt/nodevirt/node/agent"
	"github.com/nodevirt/nodevirt/node/agent/agenttest"
)

func TestConformance_Network(t *testing.T) {
	for _, b := range []netsetup.Binding{netsetup.Masquerade, netsetup.Bridge} {
		t.Run(string(b), func(t *testing.T) {
			plan, err := netsetup.NewPlan(netsetup.Input{VMIUID: "uid-a", InterfaceName: "default", Binding: b, UID: 107, GID: 107})
			if err != nil {
				t.Fatal(err)
			}
			t.Run("fake", func(t *testing.T) {
				n := agenttest.NewNetwork(agenttest.NewLog())
				const netns = "/nonexistent/netns"
				agenttest.TestNetwork(t, agenttest.NetworkEnv{
					Network: n, NetNS: netns, Plan: plan,
					Built: func(*testing.T) bool { return n.Built(netns, plan) },
				})
			})
			t.Run("host", func(t *testing.T) {
				_, err := exec.LookPath("ip")
				testenv.Require(t, os.Geteuid() == 0, "root (netns, netlink, nftables)", "test-netsetup")
				testenv.Require(t, err == nil, "the ip command (iproute2)", "netsetup-deps")
				name, path := podNetNS(t)
				agenttest.TestNetwork(t, agenttest.NetworkEnv{
					Network: agent.HostNetwork{}, NetNS: path, Plan: plan,
					Built: func(t *testing.T) bool {
						return linkExists(t, name, plan.Bridge) && linkExists(t, name, plan.Tap)
					},
				})
			})
		})
	}
}

// podNetNS creates a throwaway named netns standing in for a pod's: a
// veth eth0 (its peer stays in the netns, up) with 10.200.0.2/24 and a default route via 10.200.0.1. It
// is deleted (with all it holds) when the test ends.
func podNetNS(t *testing.T) (name, path string) {
	t.Helper()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name = "nvt-agent-" + hex.EncodeToString(b)
	ip(t, "netns", "add", name)
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("delete netns %s: %v\n%s", name, err, out)
		}
	})
	ip(t, "-n", name, "link", "set", "lo", "up")
	ip(t, "-n", name, "link", "add", "eth0", "type", "veth", "peer", "name", "eth0peer")
	ip(t, "-n", name, "link", "set", "eth0peer", "up")
	ip(t, "-n", name, "addr", "add", "10.200.0.2/24", "dev", "eth0")
	ip(t, "-n", name, "link", "set", "eth0", "up")
	ip(t, "-n", name, "route", "add", "default", "via", "10.200.0.1")
	return name, filepath.Join("/run/netns", name)
}

func ip(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// linkExists reports whether the link dev is in the named netns.
func linkExists(t *testing.T, netns, dev string) bool {
	t.Helper()
	out, err := exec.Command("ip", "-n", netns, "-j", "link", "show").Output()
	if err != nil {
		t.Fatalf("ip -n %s -j link show: %v", netns, err)
	}
	var links []struct {
		Name string `json:"ifname"`
	}
	if err := json.Unmarshal(out, &links); err != nil {
		t.Fatalf("ip -n %s -j link show: %v\n%s", netns, err, out)
	}
	for _, l := range links {
		if l.Name == dev {
			return true
		}
	}
	return false
}
