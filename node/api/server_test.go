package api_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gorilla/websocket"

	"github.com/nodevirt/nodevirt/hack/testenv"
	"github.com/nodevirt/nodevirt/node/api"
	"github.com/nodevirt/nodevirt/qmp"
	"github.com/nodevirt/nodevirt/store"
)

// fakeDomains records the lifecycle calls; QEMU and the guest agent are
// absent.
type fakeDomains struct {
	mu    sync.Mutex
	calls []string
	err   error
	// screen is Screenshot's answer (nil: no graphics device).
	screen []byte
	// dial is DialGuest's dialer (nil: no guest address).
	dial func(network string, port int) (net.Conn, error)
}

func (f *fakeDomains) record(op, uid string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, op+" "+uid)
	return f.err
}

func (f *fakeDomains) Pause(_ context.Context, uid string) error   { return f.record("pause", uid) }
func (f *fakeDomains) Unpause(_ context.Context, uid string) error { return f.record("unpause", uid) }
func (f *fakeDomains) SoftReboot(_ context.Context, uid string) error {
	return f.record("softreboot", uid)
}
func (f *fakeDomains) Freeze(_ context.Context, uid string, timeout time.Duration) error {
	return f.record("freeze "+timeout.String(), uid)
}
func (f *fakeDomains) Unfreeze(_ context.Context, uid string) error {
	return f.record("unfreeze", uid)
}
func (f *fakeDomains) Screenshot(_ context.Context, uid string, moveCursor bool) ([]byte, error) {
	if err := f.record(fmt.Sprintf("screenshot moveCursor=%v", moveCursor), uid); err != nil {
		return nil, err
	}
	if f.screen == nil {
		return nil, fmt.Errorf("domain %s: %w", uid, api.ErrNoGraphics)
	}
	return f.screen, nil
}
func (f *fakeDomains) DialGuest(_ context.Context, uid, network string, port int) (net.Conn, error) {
	if err := f.record(fmt.Sprintf("dial %s/%d", network, port), uid); err != nil {
		return nil, err
	}
	if f.dial == nil {
		return nil, fmt.Errorf("domain %s: %w", uid, api.ErrNoGuestAddress)
	}
	return f.dial(network, port)
}
func (f *fakeDomains) QMP(_ context.Context, uid string) (*qmp.Conn, error) {
	return nil, fmt.Errorf("domain %s: %w", uid, api.ErrNotRunning)
}
func (f *fakeDomains) GuestAgent(_ context.Context, uid string) (*qmp.Agent, error) {
	return nil, fmt.Errorf("domain %s: %w", uid, api.ErrNoGuestAgent)
}

// env is a server on a unix socket with a real store.
type env struct {
	dir     string
	db      *store.DB
	domains *fakeDomains
	srv     *api.Server
	socket  string
}

func newEnv(t *testing.T, recs ...store.Record) *env {
	t.Helper()
	dir := t.TempDir()
	db, err := store.Open(filepath.Join(dir, "agent.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	for _, r := range recs {
		if err := db.Put(context.Background(), r, store.Event{Time: time.Now(), Reason: "Adopted"}); err != nil {
			t.Fatal(err)
		}
	}
	e := &env{dir: dir, db: db, domains: &fakeDomains{}, socket: filepath.Join(dir, "api.sock")}
	cfg := api.DefaultConfig()
	cfg.PingPeriod = 100 * time.Millisecond
	e.srv, err = api.New(cfg, api.Deps{Domains: e.domains, Records: db})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.srv.ServeUnix(ctx, e.socket) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ServeUnix: %v", err)
		}
	})
	testenv.Eventually(t, 5*time.Second, "the node API socket accepting", func() bool {
		c, err := net.Dial("unix", e.socket)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return e
}

func (e *env) do(t *testing.T, method, path string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, "http://agent"+path, nil)
	resp, err := e.client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

var (
	live = store.Record{UID: "u1", Namespace: "ns", Name: "vm"}
	gone = store.Record{UID: "u0", Namespace: "ns", Name: "old", Gone: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
)

func TestServer_Routes(t *testing.T) {
	// A tombstone of an earlier VMI of the same name: by name, the live
	// record wins.
	earlier := store.Record{UID: "u9", Namespace: "ns", Name: "vm", Gone: time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)}
	e := newEnv(t, live, gone, earlier)
	vmi := "/v1/namespaces/ns/virtualmachineinstances/"
	tests := []struct {
		method, path string
		want         int
	}{
		{http.MethodPut, vmi + "vm/pause", http.StatusOK},
		{http.MethodPut, vmi + "vm/unpause", http.StatusOK},
		{http.MethodPut, vmi + "vm/softreboot", http.StatusOK},
		{http.MethodPut, vmi + "vm/reset", http.StatusConflict},
		{http.MethodPut, vmi + "vm/freeze", http.StatusOK},
		{http.MethodPut, vmi + "vm/unfreeze", http.StatusOK},
		{http.MethodGet, vmi + "vm/guestosinfo", http.StatusConflict},
		{http.MethodGet, vmi + "vm/pause", http.StatusMethodNotAllowed},
		{http.MethodPut, vmi + "nosuch/pause", http.StatusNotFound},
		{http.MethodPut, vmi + "old/pause", http.StatusNotFound},
		{http.MethodGet, "/nodectl/v1/domain?vmi=ns/old", http.StatusOK},
		{http.MethodGet, "/nodectl/v1/domain?vmi=u1", http.StatusOK},
		{http.MethodGet, "/nodectl/v1/timeline?vmi=ns/vm", http.StatusOK},
		{http.MethodPut, "/nodectl/v1/pause?vmi=ns/old", http.StatusNotFound},
		{http.MethodPost, "/nodectl/v1/qmp?vmi=u1", http.StatusBadRequest},
	}
	for _, tt := range tests {
		if code, body := e.do(t, tt.method, tt.path); code != tt.want {
			t.Errorf("%s %s: %d %s, want %d", tt.method, tt.path, code, body, tt.want)
		}
	}
	want := []string{"pause u1", "unpause u1", "softreboot u1", "freeze 5m0s u1", "unfreeze u1"}
	if diff := cmp.Diff(want, e.domains.calls); diff != "" {
		t.Errorf("domain calls (-want +got):\n%s", diff)
	}
}

func TestClient_Debug(t *testing.T) {
	e := newEnv(t, live, gone)
	c := api.NewClient(e.socket)
	ctx := context.Background()
	recs, err := c.Domains(ctx)
	if err != nil || len(recs) != 2 {
		t.Fatalf("Domains = %d records, %v", len(recs), err)
	}
	r, err := c.Domain(ctx, "ns/vm")
	if err != nil || r.UID != "u1" {
		t.Errorf("Domain(ns/vm) = %+v, %v", r, err)
	}
	tl, err := c.Timeline(ctx, "u1")
	if err != nil || len(tl) != 1 || tl[0].Reason != "Adopted" {
		t.Errorf("Timeline = %+v, %v", tl, err)
	}
	var ae *api.Error
	if err := c.Pause(ctx, "ns/nosuch"); !errors.As(err, &ae) || ae.Code != http.StatusNotFound {
		t.Errorf("Pause(unknown) = %v, want a 404", err)
	}
	if _, err := c.QMP(ctx, "ns/vm", api.Command{Execute: "query-status"}); !errors.As(err, &ae) || ae.Code != http.StatusConflict {
		t.Errorf("QMP(not running) = %v, want a 409", err)
	}
}

// serveOneAtATime is a unix socket that, like a QEMU chardev, serves one
// client at a time, echoing what it reads.
func serveOneAtATime(t *testing.T, path string) {
	l, err := net.Listen("unix", path)
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
			_, _ = io.Copy(c, c)
			c.Close()
		}
	}()
}

func TestConsole_NewSessionReplacesOld(t *testing.T) {
	rec := live
	e := newEnv(t)
	rec.Sockets.Serial = filepath.Join(e.dir, "serial.sock")
	if err := e.db.Put(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	serveOneAtATime(t, rec.Sockets.Serial)
	c := api.NewClient(e.socket)
	ws1 := openSession(t, c)
	if err := ws1.echo("one"); err != nil {
		t.Fatalf("first session: %v", err)
	}
	// Idle for several ping periods: the client keeps reading (and so
	// answers pings), and the session survives.
	time.Sleep(500 * time.Millisecond)
	if err := ws1.echo("still"); err != nil {
		t.Fatalf("first session after idling: %v", err)
	}
	ws2 := openSession(t, c)
	if err := ws2.echo("two"); err != nil {
		t.Fatalf("second session: %v", err)
	}
	select {
	case err := <-ws1.errc:
		if !websocket.IsCloseError(err, websocket.CloseNormalClosure) {
			t.Errorf("first session after the second opened: %v, want a normal close", err)
		}
	case <-time.After(5 * time.Second):
		t.Errorf("first session still open after the second opened")
	}
}

// session is a console client that reads continuously, as nodectl does.
type session struct {
	ws   *websocket.Conn
	msgs chan string
	errc chan error
}

func openSession(t *testing.T, c *api.Client) *session {
	t.Helper()
	ws, err := c.Console(context.Background(), "ns/vm")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	s := &session{ws: ws, msgs: make(chan string, 16), errc: make(chan error, 1)}
	go func() {
		for {
			_, b, err := ws.ReadMessage()
			if err != nil {
				s.errc <- err
				return
			}
			s.msgs <- string(b)
		}
	}()
	return s
}

// echo writes msg and waits for it to come back.
func (s *session) echo(msg string) error {
	if err := s.ws.WriteMessage(websocket.BinaryMessage, []byte(msg)); err != nil {
		return err
	}
	got := ""
	for got != msg {
		select {
		case b := <-s.msgs:
			got += b
		case err := <-s.errc:
			return err
		case <-time.After(5 * time.Second):
			return fmt.Errorf("no echo of %q (got %q)", msg, got)
		}
	}
	return nil
}
