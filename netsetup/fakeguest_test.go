package netsetup

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/nclient4"
)

// serveDHCP runs the package's DHCP server for res until the test ends.
func serveDHCP(t *testing.T, podNS string, res Result) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := ListenDHCP(ctx, podNS, res.Lease(), slog.New(slog.DiscardHandler))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("DHCP Serve: %v", err)
		}
	})
}

// guestDHCP runs a DHCP client in the fake guest and applies the lease the
// way udhcpc's script would.
func guestDHCP(t *testing.T, guestNS, guestName string) *dhcpv4.DHCPv4 {
	t.Helper()
	var ack *dhcpv4.DHCPv4
	inNS(t, guestNS, func() error {
		c, err := nclient4.New("eth0", nclient4.WithTimeout(time.Second), nclient4.WithRetry(5))
		if err != nil {
			return err
		}
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		l, err := c.Request(ctx)
		if err != nil {
			return fmt.Errorf("DHCP request: %w", err)
		}
		ack = l.ACK
		return nil
	})
	ones, _ := net.IPMask(ack.SubnetMask()).Size()
	run(t, "ip", "-n", guestName, "addr", "add", fmt.Sprintf("%s/%d", ack.YourIPAddr, ones), "dev", "eth0")
	if r := ack.Router(); len(r) > 0 {
		run(t, "ip", "-n", guestName, "route", "add", "default", "via", r[0].String())
	}
	return ack
}

// listenIn starts an HTTP server on addr inside a netns until the test ends;
// it answers with name.
func listenIn(t *testing.T, nsPath, addr, name string) {
	t.Helper()
	var l net.Listener
	inNS(t, nsPath, func() (err error) { l, err = net.Listen("tcp4", addr); return err })
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s from %s", name, r.RemoteAddr)
	})}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close(); wg.Wait() })
}

// httpGetFrom dials addr from inside a netns and returns the body.
func httpGetFrom(t *testing.T, nsPath, addr string) (string, error) {
	t.Helper()
	var conn net.Conn
	var dialErr error
	inNS(t, nsPath, func() error {
		conn, dialErr = net.DialTimeout("tcp4", addr, 2*time.Second)
		return nil
	})
	if dialErr != nil {
		return "", dialErr
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := fmt.Fprintf(conn, "GET / HTTP/1.0\r\nHost: x\r\n\r\n"); err != nil {
		return "", err
	}
	b, err := io.ReadAll(conn)
	if err != nil {
		return "", err
	}
	_, body, _ := strings.Cut(string(b), "\r\n\r\n")
	return body, nil
}

func TestMasquerade_FakeGuest(t *testing.T) {
	requireRoot(t)
	t.Run("declared ports", func(t *testing.T) { testMasqueradeFakeGuest(t, []Port{{Name: "http", Port: 80}}) })
	t.Run("all ports", func(t *testing.T) { testMasqueradeFakeGuest(t, nil) })
}

func testMasqueradeFakeGuest(t *testing.T, ports []Port) {
	tp := newTopo(t)
	before := snapshot(t, tp.pod)
	plan := mustPlan(t, Input{VMIUID: "uid-1", InterfaceName: "default", Binding: Masquerade, UID: 107, GID: 107,
		Ports: ports, Hostname: "vm1",
		DNS: DNS{Servers: []netip.Addr{netip.MustParseAddr("10.96.0.10")}, Search: []string{"cluster.local"}}})
	start := time.Now()
	res, err := Ensure(context.Background(), tp.pod, plan)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Ensure (masquerade) took %v", time.Since(start))
	wantRes := fmt.Sprintf("pod=%s guest=%s gw=%s mtu=1500", podIP+"/24", "10.0.2.2/24", "10.0.2.1")
	if got := fmt.Sprintf("pod=%s guest=%s gw=%s mtu=%d", res.PodIP, res.GuestIP, res.Gateway, res.MTU); got != wantRes {
		t.Errorf("Ensure result %s, want %s", got, wantRes)
	}

	guestName := tp.prefix + "-guest"
	guest := tp.fakeGuest(t, plan)
	serveDHCP(t, tp.pod, res)
	ack := guestDHCP(t, guest, guestName)
	got := summarize(ack)
	want := summary{Type: "ACK", YourIP: "10.0.2.2", ServerID: "10.0.2.1", Mask: "255.255.255.0", Router: "10.0.2.1",
		DNS: "10.96.0.10", Search: "cluster.local", Hostname: "vm1", MTU: []byte{0x05, 0xdc}, Lease: []byte{0xff, 0xff, 0xff, 0xff}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("DHCP ACK mismatch (-want +got):\n%s", diff)
	}

	listenIn(t, guest, ":80", "guest80")
	listenIn(t, guest, ":8080", "guest8080")
	listenIn(t, tp.node, nodeIP+":9000", "node")
	body, err := httpGetFrom(t, tp.node, podIP+":80")
	if err != nil || !strings.HasPrefix(body, "guest80 from "+nodeIP+":") {
		t.Errorf("node -> pod IP:80 = %q, %v; want the guest's server seeing the node's address", body, err)
	}
	body, err = httpGetFrom(t, tp.node, podIP+":8080")
	if len(ports) > 0 && err == nil {
		t.Errorf("node -> pod IP:8080 (undeclared) answered %q, want unreachable", body)
	}
	if len(ports) == 0 && (err != nil || !strings.HasPrefix(body, "guest8080 ")) {
		t.Errorf("node -> pod IP:8080 (all ports forwarded) = %q, %v; want the guest", body, err)
	}
	listenIn(t, guest, ":49152", "guest-migration")
	if body, err := httpGetFrom(t, tp.node, podIP+":49152"); err == nil {
		t.Errorf("node -> pod IP:49152 (migration port) answered %q, want not forwarded", body)
	}
	body, err = httpGetFrom(t, guest, nodeIP+":9000")
	if err != nil || !strings.HasPrefix(body, "node from "+podIP+":") {
		t.Errorf("guest -> node = %q, %v; want the node to see the pod IP (masquerade)", body, err)
	}

	run(t, "ip", "-n", tp.podName, "link", "del", "fakeguest")
	if err := Release(context.Background(), tp.pod, plan); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, snapshot(t, tp.pod)); diff != "" {
		t.Errorf("pod netns after Release differs from before Ensure (-before +after):\n%s", diff)
	}
}

func TestBridge_FakeGuest(t *testing.T) {
	requireRoot(t)
	tp := newTopo(t)
	before := snapshot(t, tp.pod)
	plan := mustPlan(t, Input{VMIUID: "uid-2", InterfaceName: "default", Binding: Bridge, UID: 107, GID: 107, Hostname: "vm2"})
	start := time.Now()
	res, err := Ensure(context.Background(), tp.pod, plan)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Ensure (bridge) took %v", time.Since(start))
	wantRes := fmt.Sprintf("pod=%s guest=%s gw=%s mtu=1500", podIP+"/24", podIP+"/24", nodeIP)
	if got := fmt.Sprintf("pod=%s guest=%s gw=%s mtu=%d", res.PodIP, res.GuestIP, res.Gateway, res.MTU); got != wantRes {
		t.Errorf("Ensure result %s, want %s", got, wantRes)
	}

	guestName := tp.prefix + "-guest"
	guest := tp.fakeGuest(t, plan)
	serveDHCP(t, tp.pod, res)
	ack := guestDHCP(t, guest, guestName)
	if got, want := fmt.Sprintf("%s/%s via %v", ack.YourIPAddr, net.IP(ack.SubnetMask()), ack.Router()), podIP+"/255.255.255.0 via ["+nodeIP+"]"; got != want {
		t.Errorf("DHCP ACK gave %s, want %s", got, want)
	}
	listenIn(t, guest, ":80", "guest80")
	listenIn(t, tp.node, nodeIP+":9000", "node")
	body, err := httpGetFrom(t, tp.node, podIP+":80")
	if err != nil || !strings.HasPrefix(body, "guest80 from "+nodeIP+":") {
		t.Errorf("node -> pod IP:80 = %q, %v; want the guest's server", body, err)
	}
	body, err = httpGetFrom(t, guest, nodeIP+":9000")
	if err != nil || !strings.HasPrefix(body, "node from "+podIP+":") {
		t.Errorf("guest -> node = %q, %v; want the node to see the pod IP", body, err)
	}

	run(t, "ip", "-n", tp.podName, "link", "del", "fakeguest")
	if err := Release(context.Background(), tp.pod, plan); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, snapshot(t, tp.pod)); diff != "" {
		t.Errorf("pod netns after Release differs from before Ensure (-before +after):\n%s", diff)
	}
}

// TestDHCP_Restart restarts the server the way a restarted agent would and
// measures how soon the guest gets an answer again.
func TestDHCP_Restart(t *testing.T) {
	requireRoot(t)
	tp := newTopo(t)
	plan := mustPlan(t, Input{VMIUID: "uid-3", InterfaceName: "default", Binding: Masquerade})
	res, err := Ensure(context.Background(), tp.pod, plan)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = Release(context.Background(), tp.pod, plan) })
	guest := tp.fakeGuest(t, plan)
	for i := range 3 {
		ctx, cancel := context.WithCancel(context.Background())
		start := time.Now()
		srv, err := ListenDHCP(ctx, tp.pod, res.Lease(), nil)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- srv.Serve(ctx) }()
		var offer *dhcpv4.DHCPv4
		inNS(t, guest, func() error {
			c, err := nclient4.New("eth0", nclient4.WithTimeout(500*time.Millisecond), nclient4.WithRetry(2))
			if err != nil {
				return err
			}
			defer c.Close()
			offer, err = c.DiscoverOffer(ctx)
			return err
		})
		elapsed := time.Since(start)
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		if offer == nil || !offer.YourIPAddr.Equal(net.ParseIP("10.0.2.2")) {
			t.Fatalf("run %d: offer %v", i, offer)
		}
		if elapsed > time.Second {
			t.Errorf("run %d: serving took %v, want < 1s", i, elapsed)
		}
		t.Logf("run %d: listen to first OFFER %v", i, elapsed)
	}
}

func TestRelease_MissingNetNS(t *testing.T) {
	requireRoot(t)
	plan := mustPlan(t, Input{InterfaceName: "default", Binding: Masquerade})
	if err := Release(context.Background(), "/run/netns/nvt-does-not-exist", plan); err != nil {
		t.Errorf("Release on a vanished netns: %v", err)
	}
}
