package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/gorilla/websocket"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/e2e/localcluster"
)

// runVirtctl measures the cluster path of issue 15 on the running single
// VMI name: pause/unpause with KubeVirt's virtctl (exec to Paused=True in
// the API server), the same PUT sent straight to the aggregated API (no
// virtctl process), the console's connect and first byte through the
// cluster next to the same on the node API's socket (the floor), and the
// resident memory of nodevirt-api.
func runVirtctl(ctx context.Context, e *env, r *Report, name string, cycles int) error {
	const sc = "virtctl"
	bin, err := buildVirtctl(ctx, e.root)
	if err != nil {
		return err
	}
	rc, err := clientcmd.BuildConfigFromFlags("", e.cluster.Kubeconfig)
	if err != nil {
		return err
	}
	paused := string(v1.VirtualMachineInstancePaused)
	virtctlPause := func(ctx context.Context, action string) error {
		out, err := exec.CommandContext(ctx, bin, "--kubeconfig", e.cluster.Kubeconfig, "-n", benchNamespace, action, "vmi", name).CombinedOutput()
		if err != nil {
			return fmt.Errorf("virtctl %s: %w: %s", action, err, out)
		}
		return nil
	}
	hc, err := rest.HTTPClientFor(rc)
	if err != nil {
		return err
	}
	base := strings.TrimRight(rc.Host, "/") + "/apis/subresources.kubevirt.io/v1/namespaces/" + benchNamespace + "/virtualmachineinstances/" + name
	rawPause := func(ctx context.Context, action string) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPut, base+"/"+action, nil)
		if err != nil {
			return err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			return fmt.Errorf("PUT %s: HTTP %d", action, resp.StatusCode)
		}
		return nil
	}
	for _, path := range []struct {
		label string
		do    func(context.Context, string) error
	}{
		{"virtctl", virtctlPause},
		{"aggregated API (PUT, no virtctl)", rawPause},
	} {
		var pauseSeen, unpauseSeen []time.Duration
		for i := range cycles {
			for _, step := range []struct {
				action string
				on     bool
				seen   *[]time.Duration
			}{{"pause", true, &pauseSeen}, {"unpause", false, &unpauseSeen}} {
				start := time.Now()
				if err := path.do(ctx, step.action); err != nil {
					return fmt.Errorf("%s cycle %d: %w", path.label, i, err)
				}
				at, err := e.vmis.waitChange(ctx, name, paused, step.on, start, 30*time.Second)
				if err != nil {
					return fmt.Errorf("%s cycle %d: %w", path.label, i, err)
				}
				*step.seen = append(*step.seen, at.Sub(start))
			}
		}
		r.add(
			summarize(sc, "pause via "+path.label+": until Paused=True in the API server", "ms", millis(pauseSeen)),
			summarize(sc, "unpause via "+path.label+": until Paused is gone in the API server", "ms", millis(unpauseSeen)),
		)
	}

	tlsCfg, err := rest.TLSConfigFor(rc)
	if err != nil {
		return err
	}
	header := http.Header{}
	if rc.BearerToken != "" {
		header.Set("Authorization", "Bearer "+rc.BearerToken)
	}
	cluster := &websocket.Dialer{TLSClientConfig: tlsCfg, Subprotocols: []string{"plain.kubevirt.io"}, HandshakeTimeout: 30 * time.Second}
	wsBase := "wss" + strings.TrimPrefix(base, "https")
	socket := filepath.Join(e.node.Dir, "nodevirt", "agent.sock")
	node := &websocket.Dialer{Subprotocols: []string{"plain.kubevirt.io"}, HandshakeTimeout: 30 * time.Second,
		NetDialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		}}
	nodeURL := fmt.Sprintf("ws://node/v1/namespaces/%s/virtualmachineinstances/%s/console", benchNamespace, name)
	for _, path := range []struct {
		label  string
		dialer *websocket.Dialer
		url    string
		header http.Header
	}{
		{"cluster (kube-apiserver → nodevirt-api → agent)", cluster, wsBase + "/console", header},
		{"node API socket (floor)", node, nodeURL, nil},
	} {
		var connect, first []time.Duration
		for range max(cycles/10, 3) {
			c, f, err := consoleFirstByte(ctx, path.dialer, path.url, path.header)
			if err != nil {
				return fmt.Errorf("console via %s: %w", path.label, err)
			}
			connect, first = append(connect, c), append(first, f)
		}
		r.add(
			summarize(sc, "console via "+path.label+": connect", "ms", millis(connect)),
			summarize(sc, "console via "+path.label+": first byte after a typed line", "ms", millis(first)),
		)
	}

	rss, err := e.apiRSS(ctx)
	if err != nil {
		return err
	}
	r.add(summarize(sc, "nodevirt-api resident memory (one replica)", "MiB", []float64{float64(rss) / (1 << 20)}))
	r.note(sc, "%d pause/unpause cycles on the running single VMI with KubeVirt's virtctl v1.6.0 (a process per call, admin kubeconfig) and with the same PUT sent to the aggregated API; the pause scenario's node API figures are the floor. Console: a websocket opened to the VMI's console, then a line typed; first byte is the guest's echo.", cycles)
	return nil
}

// consoleFirstByte opens a console websocket at url and returns how long
// the handshake took and how long after typing a line the first byte came.
func consoleFirstByte(ctx context.Context, d *websocket.Dialer, url string, h http.Header) (connect, first time.Duration, err error) {
	start := time.Now()
	ws, resp, err := d.DialContext(ctx, url, h)
	if err != nil {
		if resp != nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
			resp.Body.Close()
			return 0, 0, fmt.Errorf("%w (HTTP %d: %s)", err, resp.StatusCode, strings.TrimSpace(string(body)))
		}
		return 0, 0, err
	}
	defer ws.Close()
	connect = time.Since(start)
	typed := time.Now()
	if err := ws.WriteMessage(websocket.BinaryMessage, []byte("true\n")); err != nil {
		return 0, 0, err
	}
	_ = ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		_, msg, err := ws.ReadMessage()
		if err != nil {
			return 0, 0, err
		}
		if len(msg) > 0 {
			return connect, time.Since(typed), nil
		}
	}
}

// apiRSS is the resident memory of one nodevirt-api process.
func (e *env) apiRSS(ctx context.Context) (int64, error) {
	pods, err := e.kube.CoreV1().Pods("nodevirt").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=nodevirt-api"})
	if err != nil {
		return 0, err
	}
	for _, p := range pods.Items {
		if p.Status.Phase != "Running" {
			continue
		}
		pid, err := localcluster.PodProcess(string(p.UID), "nodevirt-api")
		if err != nil {
			return 0, err
		}
		return rss(pid)
	}
	return 0, fmt.Errorf("no running nodevirt-api pod")
}

// buildVirtctl builds KubeVirt's virtctl from the pinned tools module
// (make virtctl) and returns its path.
func buildVirtctl(ctx context.Context, root string) (string, error) {
	cmd := exec.CommandContext(ctx, "make", "-C", root, "--no-print-directory", "virtctl")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("make virtctl: %w: %s", err, out)
	}
	return filepath.Join(root, "_output", "bin", "virtctl"), nil
}
