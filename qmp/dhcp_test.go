package qmp_test

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nodevirt/nodevirt/hack/testenv"
)

// netns makes a throwaway network namespace with a bridge (10.0.2.1/24) and
// a tap for QEMU, removed on cleanup. It needs root and iproute2.
func netns(t *testing.T) string {
	t.Helper()
	_, err := exec.LookPath("ip")
	testenv.Require(t, err == nil && os.Geteuid() == 0, "root and iproute2 (ip)", "guest-deps")
	ns := fmt.Sprintf("qmpt%d-%d", os.Getpid()%100000, rand.IntN(100000))
	run(t, "ip", "netns", "add", ns)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		{"link", "add", "br0", "type", "bridge"},
		{"addr", "add", "10.0.2.1/24", "dev", "br0"},
		{"link", "set", "br0", "up"},
		{"tuntap", "add", "dev", "tap0", "mode", "tap"},
		{"link", "set", "tap0", "master", "br0"},
		{"link", "set", "tap0", "up"},
	} {
		run(t, "ip", append([]string{"-n", ns}, args...)...)
	}
	return ns
}

// TestGuest_DHCPAndHTTP checks the guest's network contract: DHCP with
// address, gateway, MTU and hostname applied, the gateway ping and both
// HTTP servers. It runs busybox udhcpd in a private netns.
func TestGuest_DHCPAndHTTP(t *testing.T) {
	t.Parallel()
	guestDir(t)
	lookTool(t, "busybox")
	ns := netns(t)

	dir := t.TempDir()
	conf := filepath.Join(dir, "udhcpd.conf")
	leases := filepath.Join(dir, "leases")
	if err := os.WriteFile(leases, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := strings.Join([]string{
		"start 10.0.2.2", "end 10.0.2.2", "interface br0", "lease_file " + leases,
		"opt router 10.0.2.1", "opt dns 10.0.2.1", "opt subnet 255.255.255.0",
		"opt hostname vm-dhcp", "opt mtu 1400",
	}, "\n") + "\n"
	if err := os.WriteFile(conf, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	dhcpd := exec.Command("ip", "netns", "exec", ns, "busybox", "udhcpd", "-f", conf)
	if err := dhcpd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		dhcpd.Process.Kill() // by pid: ip netns exec execs udhcpd
		dhcpd.Wait()
	})

	vm := startVM(t, vmConfig{
		NetNS: ns,
		Args: []string{
			"-netdev", "tap,id=net0,ifname=tap0,script=no,downscript=no",
			"-device", "virtio-net-pci,netdev=net0,mac=52:54:00:00:02:02",
		},
	})
	vm.WaitSerial(t, readyMarker, 1, bootTimeout)
	got := vm.WaitSerial(t, "NODEVIRT-GUEST-DHCP", 1, 30*time.Second)
	if want := "NODEVIRT-GUEST-DHCP ip=10.0.2.2/24 gw=10.0.2.1"; got != want {
		t.Errorf("DHCP marker %q, want %q", got, want)
	}
	if got := vm.WaitSerial(t, "NODEVIRT-GUEST-GW-", 1, 20*time.Second); got != "NODEVIRT-GUEST-GW-OK" {
		t.Errorf("gateway marker %q", got)
	}

	a := vm.DialAgent(t)
	ctx := ctxT(t, 20*time.Second)
	if h, err := a.HostName(ctx); err != nil || h != "vm-dhcp" {
		t.Errorf("HostName = %q, %v; want vm-dhcp", h, err)
	}
	ifs, err := a.NetworkInterfaces(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var addrs []string
	for _, i := range ifs {
		for _, ip := range i.IPAddresses {
			addrs = append(addrs, fmt.Sprintf("%s %s/%d", i.Name, ip.Address, ip.Prefix))
		}
	}
	if !slices.Contains(addrs, "eth0 10.0.2.2/24") {
		t.Errorf("guest addresses %v lack eth0 10.0.2.2/24", addrs)
	}
	for _, file := range []string{"/sys/class/net/eth0/mtu", "/etc/resolv.conf"} {
		st, err := a.Run(ctx, "/bin/cat", file)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %q", file, st.OutData)
		want := map[string]string{"/sys/class/net/eth0/mtu": "1400", "/etc/resolv.conf": "nameserver 10.0.2.1"}[file]
		if !strings.Contains(string(st.OutData), want) {
			t.Errorf("%s = %q, want %q in it", file, st.OutData, want)
		}
	}
	for _, port := range []string{"80", "8080"} {
		url := "http://10.0.2.2:" + port + "/"
		// Run this test binary as the HTTP client inside the netns.
		cmd := exec.Command("ip", "netns", "exec", ns, os.Args[0], "-test.run=^TestHelperHTTPGet$")
		cmd.Env = append(os.Environ(), "QMPTEST_HTTP_GET="+url)
		out, err := cmd.Output()
		if got := strings.TrimSpace(string(out)); err != nil || got != "nodevirt-guest vm-dhcp" {
			t.Errorf("GET %s = %q, %v; want %q", url, got, err, "nodevirt-guest vm-dhcp")
		}
	}
}

// TestHelperHTTPGet is not a test: TestGuest_DHCPAndHTTP runs the test
// binary with QMPTEST_HTTP_GET=url inside a netns to fetch url.
func TestHelperHTTPGet(t *testing.T) {
	url := os.Getenv("QMPTEST_HTTP_GET")
	if url == "" {
		t.Skip("helper process for TestGuest_DHCPAndHTTP")
	}
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer resp.Body.Close()
	io.Copy(os.Stdout, resp.Body)
	os.Exit(0)
}
