package agent_test

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/nodevirt/nodevirt/cluster/certrotation"
	"github.com/nodevirt/nodevirt/cluster/certrotation/certrotationtest"
	"github.com/nodevirt/nodevirt/hack/testenv"
	"github.com/nodevirt/nodevirt/node/api"
)

// writeTestCA plays nodevirt-controller's signer and the kubelet: a fresh
// CA's certificate as the mounted bundle dir/ca.crt, and a serving
// certificate of testNode already in the agent's dir/pki (as a restarted
// agent finds it), so the agent needs no CSR. It returns a free loopback
// address for the agent's mTLS listener and the CA, for client
// certificates.
func writeTestCA(t *testing.T, dir string) (string, *certrotationtest.CA) {
	t.Helper()
	ca := certrotationtest.NewCA(t, "nodevirt-test-ca")
	ca.WriteBundle(t, filepath.Join(dir, "ca.crt"))
	if err := certrotation.WriteFile(filepath.Join(dir, "pki", "agent-serving.pem"), ca.AgentServing(t, testNode)); err != nil {
		t.Fatal(err)
	}
	return testenv.FreeLoopbackAddr(t), ca
}

// apiHTTP is an HTTP client of the agent's unix socket.
func (h *harness) apiHTTP() *http.Client {
	return &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", h.apiSocket)
		},
	}}
}

// vmiPath is the public route of the VMI's subresource sub.
func (v *vm) vmiPath(sub string) string {
	return fmt.Sprintf("/v1/namespaces/%s/virtualmachineinstances/%s/%s", v.h.ns, v.name, sub)
}

// call sends method to the VM's public route sub on the unix socket and
// returns status and body.
func (v *vm) call(t *testing.T, method, sub string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, "http://agent"+v.vmiPath(sub), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := v.h.apiHTTP().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, sub, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// mustCall is call that fails the test on a status other than 200.
func (v *vm) mustCall(t *testing.T, method, sub string) []byte {
	t.Helper()
	code, b := v.call(t, method, sub)
	if code != http.StatusOK {
		t.Fatalf("VM %s: %s %s: %d %s", v.name, method, sub, code, b)
	}
	return b
}

// stream opens the VM's console or vnc websocket on the unix socket.
func (v *vm) stream(t *testing.T, sub string) *websocket.Conn {
	t.Helper()
	d := websocket.Dialer{
		NetDialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var nd net.Dialer
			return nd.DialContext(ctx, "unix", v.h.apiSocket)
		},
		Subprotocols:     []string{api.Subprotocol},
		HandshakeTimeout: 20 * time.Second,
	}
	ws, resp, err := d.Dial("ws://agent"+v.vmiPath(sub), nil)
	if err != nil {
		status := ""
		if resp != nil {
			b, _ := io.ReadAll(resp.Body)
			status = fmt.Sprintf(" (%s: %s)", resp.Status, b)
		}
		t.Fatalf("VM %s: %s websocket: %v%s", v.name, sub, err, status)
	}
	t.Cleanup(func() { ws.Close() })
	return ws
}

// readUntil reads ws until its accumulated output contains want.
func readUntil(t *testing.T, ws *websocket.Conn, want string, timeout time.Duration) string {
	t.Helper()
	var got strings.Builder
	deadline := time.Now().Add(timeout)
	_ = ws.SetReadDeadline(deadline)
	defer ws.SetReadDeadline(time.Time{})
	for !strings.Contains(got.String(), want) {
		_, b, err := ws.ReadMessage()
		if err != nil {
			t.Fatalf("waiting for %q: %v; got %q", want, err, got.String())
		}
		got.Write(b)
	}
	return got.String()
}

// uptimeViaAPI reads the guest's /proc/uptime with guest-exec through the
// agent passthrough (the node agent holds the guest agent channel).
func (v *vm) uptimeViaAPI(t *testing.T, c *api.Client) float64 {
	t.Helper()
	_, out := v.execViaAPI(t, c, 30*time.Second, "/bin/cat", "/proc/uptime")
	f := strings.Fields(string(out))
	if len(f) == 0 {
		t.Fatalf("VM %s: /proc/uptime = %q", v.name, out)
	}
	up, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		t.Fatal(err)
	}
	return up
}

// execViaAPI runs path with args in the guest through guest-exec on the node
// API, waits for it to exit within timeout, and returns its exit code and
// standard output.
func (v *vm) execViaAPI(t *testing.T, c *api.Client, timeout time.Duration, path string, args ...string) (int, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	ref := v.h.ns + "/" + v.name
	req, _ := json.Marshal(map[string]any{"path": path, "arg": args, "capture-output": true})
	res, err := c.Agent(ctx, ref, api.Command{Execute: "guest-exec", Arguments: req})
	if err != nil {
		t.Fatalf("VM %s: guest-exec: %v", v.name, err)
	}
	var started struct{ PID int }
	if err := json.Unmarshal(res, &started); err != nil {
		t.Fatal(err)
	}
	for {
		req, _ := json.Marshal(map[string]int{"pid": started.PID})
		res, err := c.Agent(ctx, ref, api.Command{Execute: "guest-exec-status", Arguments: req})
		if err != nil {
			t.Fatalf("VM %s: guest-exec-status: %v", v.name, err)
		}
		var st struct {
			Exited   bool   `json:"exited"`
			ExitCode int    `json:"exitcode"`
			OutData  string `json:"out-data"`
		}
		if err := json.Unmarshal(res, &st); err != nil {
			t.Fatal(err)
		}
		if st.Exited {
			out, err := base64.StdEncoding.DecodeString(st.OutData)
			if err != nil {
				t.Fatal(err)
			}
			return st.ExitCode, out
		}
		select {
		case <-ctx.Done():
			t.Fatalf("VM %s: guest-exec of %s did not finish", v.name, path)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (h *harness) tlsGet(cfg *tls.Config, path string) (int, error) {
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
	resp, err := c.Get("https://" + h.tlsAddr + path)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}
