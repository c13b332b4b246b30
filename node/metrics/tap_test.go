package metrics_test

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nodevirt/nodevirt/hack/testenv"
	"github.com/nodevirt/nodevirt/node/metrics"
)

// needRoot requires root and iproute2 (testenv.Require).
func needRoot(t testing.TB) {
	t.Helper()
	_, err := exec.LookPath("ip")
	testenv.Require(t, os.Geteuid() == 0 && err == nil,
		"root and iproute2 (reading counters in a network namespace)", "test-metrics")
}

func ip(t testing.TB, args ...string) {
	t.Helper()
	if b, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, b)
	}
}

// tapNetNS makes a throwaway netns holding a veth pair "vtap"/"vpeer" and
// returns its path.
func tapNetNS(t testing.TB) string {
	needRoot(t)
	ns := fmt.Sprintf("nvm-%d", os.Getpid())
	ip(t, "netns", "add", ns)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	ip(t, "-n", ns, "link", "add", "vtap", "type", "veth", "peer", "name", "vpeer")
	ip(t, "-n", ns, "addr", "add", "10.99.0.1/24", "dev", "vtap")
	ip(t, "-n", ns, "link", "set", "vtap", "up")
	ip(t, "-n", ns, "link", "set", "vpeer", "up")
	// Nobody answers 10.99.0.2: the ARP requests go out of vtap only.
	_ = exec.Command("ip", "netns", "exec", ns, "ping", "-c", "2", "-i", "0.2", "-W", "1", "10.99.0.2").Run()
	return "/run/netns/" + ns
}

// BenchmarkTapCounters is one VM's share of a scrape's network counters.
func BenchmarkTapCounters(b *testing.B) {
	nsPath := tapNetNS(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := metrics.TapCounters(nsPath, map[string]string{"default": "vtap"}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestTapCounters_GuestView sends ARP probes out of one end of a veth pair
// in a throwaway netns and reads that end as if it were a tap: what the
// device transmits is what the guest receives.
func TestTapCounters_GuestView(t *testing.T) {
	nsPath := tapNetNS(t)
	var got []metrics.Interface
	deadline := time.Now().Add(5 * time.Second)
	for {
		var err error
		got, err = metrics.TapCounters(nsPath, map[string]string{"default": "vtap"})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 1 && got[0].RxPackets > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(got) != 1 || got[0].Name != "default" {
		t.Fatalf("TapCounters = %+v, want one interface named default", got)
	}
	if got[0].RxPackets == 0 || got[0].RxBytes == 0 {
		t.Errorf("guest receive counters %+v, want the device's transmitted ARP probes", got[0])
	}
	if _, err := metrics.TapCounters(nsPath, map[string]string{"x": "missing0"}); err == nil {
		t.Errorf("TapCounters of a missing tap: no error")
	}
}
