package api_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gorilla/websocket"

	"github.com/nodevirt/nodevirt/node/api"
)

func TestScreenshot(t *testing.T) {
	e := newEnv(t, live)
	vmi := "/v1/namespaces/ns/virtualmachineinstances/vm/vnc/screenshot"
	if code, body := e.do(t, http.MethodGet, vmi); code != http.StatusBadRequest || !strings.Contains(body, "no graphics devices") {
		t.Errorf("no graphics: %d %s, want 400 naming the missing graphics device", code, body)
	}
	e.domains.screen = []byte("\x89PNG fake")
	code, body := e.do(t, http.MethodGet, vmi+"?moveCursor=true")
	if code != http.StatusOK || body != "\x89PNG fake" {
		t.Errorf("screenshot: %d %q", code, body)
	}
	e.do(t, http.MethodGet, vmi+"?moveCursor=yes")
	if code, _ := e.do(t, http.MethodGet, "/v1/namespaces/ns/virtualmachineinstances/nosuch/vnc/screenshot"); code != http.StatusNotFound {
		t.Errorf("unknown VMI: %d, want 404", code)
	}
	want := []string{"screenshot moveCursor=false u1", "screenshot moveCursor=true u1", "screenshot moveCursor=false u1"}
	if diff := cmp.Diff(want, e.domains.calls); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}

func TestVNC_NoGraphics(t *testing.T) {
	e := newEnv(t, live) // no VNC socket in the record: no graphics device
	code, body := e.do(t, http.MethodGet, "/v1/namespaces/ns/virtualmachineinstances/vm/vnc")
	if code != http.StatusBadRequest || !strings.Contains(body, "no graphics devices") {
		t.Errorf("vnc without a graphics device: %d %s, want 400", code, body)
	}
}

func TestScreenshot_ContentType(t *testing.T) {
	e := newEnv(t, live)
	e.domains.screen = []byte("\x89PNG")
	resp := e.get(t, "/v1/namespaces/ns/virtualmachineinstances/vm/vnc/screenshot")
	if ct := resp.Header.Get("Content-Type"); ct != "image/png" {
		t.Errorf("Content-Type %q, want image/png", ct)
	}
}

func TestPortForward_Validation(t *testing.T) {
	e := newEnv(t, live)
	pf := "/v1/namespaces/ns/virtualmachineinstances/vm/portforward/"
	tests := []struct {
		path     string
		want     int
		mentions string
	}{
		{"0", http.StatusBadRequest, "port"},
		{"65536", http.StatusBadRequest, "port"},
		{"-1", http.StatusBadRequest, "port"},
		{"http", http.StatusBadRequest, "port"},
		{"80/sctp", http.StatusBadRequest, "protocol"},
		{"80/TCP", http.StatusBadRequest, "protocol"},
		{"80", http.StatusBadRequest, "no pod network address"}, // the fake has no guest address
		{"80/udp", http.StatusBadRequest, "no pod network address"},
		{"80/tcp/extra", http.StatusNotFound, ""},
	}
	for _, tt := range tests {
		code, body := e.do(t, http.MethodGet, pf+tt.path)
		if code != tt.want || !strings.Contains(body, tt.mentions) {
			t.Errorf("portforward/%s: %d %s, want %d mentioning %q", tt.path, code, body, tt.want, tt.mentions)
		}
	}
	want := []string{"dial tcp/80 u1", "dial udp/80 u1"}
	if diff := cmp.Diff(want, e.domains.calls); diff != "" {
		t.Errorf("dials (-want +got):\n%s", diff)
	}
	if code, _ := e.do(t, http.MethodGet, "/v1/namespaces/ns/virtualmachineinstances/nosuch/portforward/80"); code != http.StatusNotFound {
		t.Errorf("unknown VMI: %d, want 404", code)
	}
}

// echoServers starts a TCP and a UDP echo server on loopback and returns a
// dialer to them that ignores the port asked for.
func echoServers(t *testing.T) func(network string, port int) (net.Conn, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); c.Close() }()
		}
	}()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 65536)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo(buf[:n], from)
		}
	}()
	return func(network string, _ int) (net.Conn, error) {
		if network == "udp" {
			return net.Dial("udp", pc.LocalAddr().String())
		}
		return net.Dial("tcp", l.Addr().String())
	}
}

func TestPortForward_Streams(t *testing.T) {
	e := newEnv(t, live)
	e.domains.dial = echoServers(t)
	pf := "/v1/namespaces/ns/virtualmachineinstances/vm/portforward/"
	// Several forwards at once: none replaces another.
	tcp1 := e.websocket(t, pf+"80")
	tcp2 := e.websocket(t, pf+"8080/tcp")
	udp := e.websocket(t, pf+"53/udp")
	for i, ws := range []*websocket.Conn{tcp1, tcp2, tcp1} {
		msg := fmt.Sprintf("hello %d", i)
		if got := roundTrip(t, ws, []byte(msg)); string(got) != msg {
			t.Errorf("tcp echo %d: %q", i, got)
		}
	}
	// UDP: each message is one datagram, echoed as one message.
	for _, size := range []int{1, 1400, 9000} {
		msg := bytes.Repeat([]byte{'u'}, size)
		if got := roundTrip(t, udp, msg); !bytes.Equal(got, msg) {
			t.Errorf("udp datagram of %d bytes came back as %d bytes", size, len(got))
		}
	}
}

func roundTrip(t *testing.T, ws *websocket.Conn, msg []byte) []byte {
	t.Helper()
	if err := ws.WriteMessage(websocket.BinaryMessage, msg); err != nil {
		t.Fatal(err)
	}
	var got []byte
	_ = ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	for len(got) < len(msg) {
		typ, b, err := ws.ReadMessage()
		if err != nil {
			t.Fatalf("read: %v (got %d of %d bytes)", err, len(got), len(msg))
		}
		if typ != websocket.BinaryMessage {
			t.Errorf("message type %d, want binary", typ)
		}
		got = append(got, b...)
	}
	return got
}

func (e *env) dialer() websocket.Dialer {
	return websocket.Dialer{
		NetDialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", e.socket)
		},
		Subprotocols:     []string{api.Subprotocol},
		HandshakeTimeout: 5 * time.Second,
	}
}

func (e *env) websocket(t *testing.T, path string) *websocket.Conn {
	t.Helper()
	d := e.dialer()
	ws, resp, err := d.Dial("ws://agent"+path, nil)
	if err != nil {
		t.Fatalf("websocket %s: %v", path, err)
	}
	if p := resp.Header.Get("Sec-WebSocket-Protocol"); p != api.Subprotocol {
		t.Errorf("subprotocol %q, want %q", p, api.Subprotocol)
	}
	t.Cleanup(func() { ws.Close() })
	return ws
}

func (e *env) get(t *testing.T, path string) *http.Response {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", e.socket)
	}}}
	resp, err := c.Get("http://agent" + path)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

func TestSoftReboot_StatusCodes(t *testing.T) {
	e := newEnv(t, live)
	path := "/v1/namespaces/ns/virtualmachineinstances/vm/softreboot"
	for _, tt := range []struct {
		err  error
		want int
	}{
		{nil, http.StatusOK},
		{fmt.Errorf("domain u1: %w", api.ErrPaused), http.StatusConflict},
		{fmt.Errorf("domain u1: %w", api.ErrBusy), http.StatusConflict},
		{fmt.Errorf("domain u1: %w", api.ErrNotRunning), http.StatusConflict},
		{fmt.Errorf("domain u1: the guest did not shut down: %w", api.ErrTimeout), http.StatusGatewayTimeout},
		{fmt.Errorf("domain u1: qmp: boom"), http.StatusBadGateway},
	} {
		e.domains.err = tt.err
		if code, body := e.do(t, http.MethodPut, path); code != tt.want {
			t.Errorf("softreboot failing with %v: %d %s, want %d", tt.err, code, body, tt.want)
		}
	}
}
