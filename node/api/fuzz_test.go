package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzNodeAPI sends arbitrary requests to the node API's debug socket (the
// public routes and nodectl's; a real store, a real unix socket, the fake
// domains): every answer is below 500, every 4xx carries a message, the
// server keeps answering, and the store is unchanged (a request never
// half-writes a record).
func FuzzNodeAPI(f *testing.F) {
	vmi := "/v1/namespaces/ns/virtualmachineinstances/"
	for _, seed := range []struct {
		method, path string
		body         string
	}{
		{"PUT", vmi + "vm/pause", ""},
		{"PUT", vmi + "../../../etc/pause", ""},
		{"PUT", vmi + "vm%2F..%2F..%2Fx/pause", ""},
		{"PUT", vmi + strings.Repeat("a", 70000) + "/pause", ""},
		{"PUT", "/v1/namespaces/$(reboot)/virtualmachineinstances/`id`/pause", ""},
		{"PUT", "/v1/namespaces/ns/virtualmachineinstances/ünï☃/softreboot", ""},
		{"GET", vmi + "vm/portforward/-1", ""},
		{"GET", vmi + "vm/portforward/99999999999999999999/tcp", ""},
		{"GET", vmi + "vm/portforward/22/sctp", ""},
		{"GET", vmi + "vm/vnc/screenshot?moveCursor=%00", ""},
		{"GET", "/nodectl/v1/domain?vmi=", ""},
		{"GET", "/nodectl/v1/domain?vmi=ns/vm&vmi=u0", ""},
		{"GET", "/nodectl/v1/timeline?vmi=%2F%2F%2F", ""},
		{"POST", "/nodectl/v1/qmp?vmi=u1", `{"execute":"quit"}`},
		{"POST", "/nodectl/v1/qmp?vmi=u1", `{"execute":`},
		{"POST", "/nodectl/v1/agent?vmi=ns/vm", `{"execute":"guest-exec","arguments":{"path":"/bin/sh","arg":["-c","reboot"]}}`},
		{"POST", "/nodectl/v1/agent?vmi=ns/vm", strings.Repeat("[", 100000)},
		{"PUT", "/nodectl/v1/pause?vmi=ns/old", ""},
		{"DELETE", "/nodectl/v1/domains", ""},
	} {
		f.Add(seed.method, seed.path, []byte(seed.body))
	}
	f.Fuzz(func(t *testing.T, method, path string, body []byte) {
		switch method {
		case "GET", "PUT", "POST", "DELETE", "PATCH":
		default:
			return
		}
		if !strings.HasPrefix(path, "/") || strings.ContainsAny(path, " \r\n\x00#") {
			return // not an HTTP request line a client can send
		}
		e := newEnv(t, live, gone)
		before := e.records(t)
		req, err := http.NewRequest(method, "http://agent"+path, bytes.NewReader(body))
		if err != nil {
			return
		}
		resp, err := e.client().Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 500 {
			t.Fatalf("%s %s: HTTP %d %s", method, path, resp.StatusCode, b)
		}
		if resp.StatusCode >= 400 && len(bytes.TrimSpace(b)) == 0 {
			t.Fatalf("%s %s: HTTP %d without a message", method, path, resp.StatusCode)
		}
		if diff := cmp.Diff(before, e.records(t)); diff != "" {
			t.Fatalf("%s %s changed the store (-before +after):\n%s", method, path, diff)
		}
	})
}

// client is an HTTP client of the env's socket.
func (e *env) client() *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", e.socket)
	}}}
}

// records are the store's records as JSON (what the debug API lists).
func (e *env) records(t *testing.T) string {
	t.Helper()
	resp, err := e.client().Get("http://agent/nodectl/v1/domains")
	if err != nil {
		t.Fatalf("the node API stopped answering: %v", err)
	}
	defer resp.Body.Close()
	var v any
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(v)
	return string(b)
}
