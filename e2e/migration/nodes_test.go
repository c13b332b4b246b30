package migration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodevirt/nodevirt/hack/testenv"
)

// VMOnEachNode, the proving ground: every node offers the agent's devices
// through a device-plugin directory of its own, and a VM pinned to each
// node runs there, boots, and serves HTTP at its pod IP.
func testVMOnEachNode(t *testing.T, s *suite) {
	for _, n := range s.cluster.Nodes {
		node, err := s.kube.CoreV1().Nodes().Get(t.Context(), n.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		tun := node.Status.Allocatable["devices.kubevirt.io/tun"]
		if tun.IsZero() {
			t.Errorf("node %s: allocatable devices.kubevirt.io/tun = %s, want > 0", n.Name, tun.String())
		}
		// The kubelet's registration socket and the agent's plugin sockets
		// are in the node's own directory.
		if n.DevicePlugins == "" {
			t.Fatalf("node %s: cluster.env names no device-plugin directory", n.Name)
		}
		if fi, err := os.Stat(filepath.Join(n.DevicePlugins, "kubelet.sock")); err != nil || fi.Mode()&os.ModeSocket == 0 {
			t.Errorf("node %s: no kubelet.sock in %s: %v", n.Name, n.DevicePlugins, err)
		}
		t.Logf("node %s: tun %s, device plugins in %s: %v", n.Name, tun.String(), n.DevicePlugins, listDir(n.DevicePlugins))
	}
	if len(s.cluster.Nodes) >= 2 && s.cluster.Nodes[0].DevicePlugins == s.cluster.Nodes[1].DevicePlugins {
		t.Errorf("nodes %s and %s share the device-plugin directory %s", s.cluster.Nodes[0].Name, s.cluster.Nodes[1].Name,
			s.cluster.Nodes[0].DevicePlugins)
	}

	var specs []vmSpec
	for i, n := range s.cluster.Nodes {
		specs = append(specs, vmSpec{name: fmt.Sprintf("on-node%d", i), node: n.Name})
	}
	began := time.Now()
	vmis := s.startVMs(t, specs...)
	s.measure(t, "%d VMs (one pinned to each node) created -> all guests up: %v", len(vmis), time.Since(began).Round(100*time.Millisecond))
	for i, vmi := range vmis {
		want := specs[i].node
		procs := s.qemuProcs(specs[i].name)
		if len(procs) != 1 || procs[0].node != want {
			t.Errorf("VM %s: QEMU processes %+v, want one on %s", specs[i].name, procs, want)
		}
		body := httpGetEventually(t, "http://"+net.JoinHostPort(vmi.podIP(), "80")+"/", 60*time.Second)
		if !strings.HasPrefix(body, "nodevirt-guest") {
			t.Errorf("VM %s on %s: GET :80 = %q, want nodevirt-guest <hostname>", specs[i].name, want, body)
		}
		t.Logf("VM %s on %s answers at %s: %q", specs[i].name, want, vmi.podIP(), body)
	}
}

func listDir(dir string) []string {
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// httpGet GETs url once with timeout and returns the trimmed body of a 200.
func httpGet(ctx context.Context, url string, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", fmt.Errorf("GET %s: %s: read body: %w", url, resp.Status, err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", errors.New("GET " + url + ": " + resp.Status)
	}
	return strings.TrimSpace(string(b)), nil
}

// httpGetEventually GETs url until it answers 200 and returns the body.
func httpGetEventually(t *testing.T, url string, timeout time.Duration) string {
	t.Helper()
	var body string
	testenv.Eventually(t, timeout, fmt.Sprintf("GET %s to answer 200", url), func() error {
		var err error
		body, err = httpGet(t.Context(), url, 3*time.Second)
		return err
	})
	return body
}
