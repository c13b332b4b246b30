package qmp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nodevirt/nodevirt/hack/testenv"
	"github.com/nodevirt/nodevirt/qmp"
	"github.com/nodevirt/nodevirt/qmp/qmptest"
)

// dial connects to a fake server and closes the Conn on cleanup.
func dial(t *testing.T, s *qmptest.Server) *qmp.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := qmp.Dial(ctx, s.Path())
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestDial_Greeting(t *testing.T) {
	s := qmptest.NewServer(t)
	c := dial(t, s)
	g := c.Greeting()
	if got, want := fmt.Sprintf("%d.%d.%d", g.Version.QEMU.Major, g.Version.QEMU.Minor, g.Version.QEMU.Micro), "7.2.22"; got != want {
		t.Errorf("version = %s, want %s", got, want)
	}
	if diff := cmp.Diff([]string{"qmp_capabilities"}, commands(s.Received())); diff != "" {
		t.Errorf("commands (-want +got):\n%s", diff)
	}
}

func TestDial_GreetingFailures(t *testing.T) {
	tests := []struct {
		name     string
		greeting string
		caps     qmptest.Handler
		wantCtx  bool // the error also wraps context.DeadlineExceeded
	}{
		// The capabilities request goes out before the greeting arrives:
		// a peer that stays silent times out, one that answers it
		// without a greeting is no QMP server either.
		{name: "no greeting", greeting: "", wantCtx: true, caps: func(qmptest.Request) (any, error) {
			return nil, qmptest.ErrNoReply
		}},
		{name: "no greeting, capabilities answered", greeting: ""},
		{name: "not JSON", greeting: "hello"},
		{name: "not a greeting", greeting: `{"return": {}}`},
		{name: "capabilities refused", greeting: qmptest.DefaultGreeting, caps: func(qmptest.Request) (any, error) {
			return nil, &qmp.Error{Class: qmp.ClassGenericError, Desc: "no"}
		}},
		{name: "capabilities unanswered", greeting: qmptest.DefaultGreeting, wantCtx: true, caps: func(qmptest.Request) (any, error) {
			return nil, qmptest.ErrNoReply
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := qmptest.NewServer(t)
			s.SetGreeting(tt.greeting)
			if tt.caps != nil {
				s.Handle("qmp_capabilities", tt.caps)
			}
			timeout := 5 * time.Second // failures are quick: a loaded machine must not turn them into timeouts
			if tt.wantCtx {
				timeout = 200 * time.Millisecond
			}
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			c, err := qmp.Dial(ctx, s.Path())
			if err == nil {
				c.Close()
				t.Fatal("Dial succeeded")
			}
			if !errors.Is(err, qmp.ErrGreeting) {
				t.Errorf("Dial error %v does not wrap ErrGreeting", err)
			}
			if got := errors.Is(err, context.DeadlineExceeded); got != tt.wantCtx {
				t.Errorf("errors.Is(%v, DeadlineExceeded) = %v, want %v", err, got, tt.wantCtx)
			}
		})
	}
}

// The handshake waits for QEMU once: the capabilities request is on the
// wire before the greeting is read. This peer greets only after it has
// read the request, which a client waiting for the greeting first would
// never send.
func TestDial_CapabilitiesSentWithTheConnection(t *testing.T) {
	s := qmptest.NewServer(t)
	s.GreetAfterFirstRequest()
	dial(t, s)
	if diff := cmp.Diff([]string{"qmp_capabilities"}, commands(s.Received())); diff != "" {
		t.Errorf("commands (-want +got):\n%s", diff)
	}
}

func TestConn_ConcurrentCallersGetTheirOwnReplies(t *testing.T) {
	s := qmptest.NewServer(t)
	s.Handle("echo", func(r qmptest.Request) (any, error) {
		var a struct {
			N int `json:"n"`
		}
		json.Unmarshal(r.Arguments, &a)
		// Reply out of order: later requests overtake earlier ones.
		time.Sleep(time.Duration(a.N%5) * time.Millisecond)
		return a, nil
	})
	c := dial(t, s)

	const callers = 64
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			var got struct {
				N int `json:"n"`
			}
			if err := c.Execute(ctx, "echo", map[string]int{"n": i}, &got); err != nil {
				errs[i] = err
				return
			}
			if got.N != i {
				errs[i] = fmt.Errorf("caller %d got reply for %d", i, got.N)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

func TestConn_ServerNeverAnswers(t *testing.T) {
	s := qmptest.NewServer(t)
	s.Handle("query-status", func(qmptest.Request) (any, error) { return nil, qmptest.ErrNoReply })
	s.Handle("query-kvm", func(qmptest.Request) (any, error) { return qmp.KVMInfo{Present: true}, nil })
	c := dial(t, s)

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.QueryStatus(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("QueryStatus error = %v, want DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("QueryStatus returned after %v", d)
	}

	// The connection stays usable for other commands.
	ctx2, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel2()
	k, err := c.QueryKVM(ctx2)
	if err != nil {
		t.Fatalf("QueryKVM after a timeout: %v", err)
	}
	if diff := cmp.Diff(qmp.KVMInfo{Present: true}, k); diff != "" {
		t.Errorf("QueryKVM (-want +got):\n%s", diff)
	}
}

func TestConn_Cancel(t *testing.T) {
	s := qmptest.NewServer(t)
	s.Handle("stop", func(qmptest.Request) (any, error) { return nil, qmptest.ErrNoReply })
	c := dial(t, s)

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- c.Stop(ctx) }()
	testenv.Eventually(t, 5*time.Second, "two commands received", func() bool { return len(s.Received()) == 2 })
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Stop error = %v, want Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Stop did not return after cancel")
	}
}

func TestConn_ServerClosesMidCommand(t *testing.T) {
	s := qmptest.NewServer(t)
	s.Handle("cont", func(qmptest.Request) (any, error) { return nil, qmptest.ErrHangup })
	c := dial(t, s)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Cont(ctx); !errors.Is(err, qmp.ErrClosed) {
		t.Fatalf("Cont error = %v, want ErrClosed", err)
	}
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done not closed after the server hung up")
	}
	if err := c.Err(); !errors.Is(err, qmp.ErrClosed) {
		t.Errorf("Err() = %v, want ErrClosed", err)
	}
	if _, err := c.QueryStatus(ctx); !errors.Is(err, qmp.ErrClosed) {
		t.Errorf("QueryStatus after hangup = %v, want ErrClosed", err)
	}
}

func TestConn_CloseUnblocksEveryone(t *testing.T) {
	s := qmptest.NewServer(t)
	s.Handle("query-migrate", func(qmptest.Request) (any, error) { return nil, qmptest.ErrNoReply })
	c := dial(t, s)
	sub := c.Subscribe(1)

	const callers = 8
	errc := make(chan error, callers)
	for range callers {
		go func() {
			_, err := c.QueryMigrate(context.Background()) // no deadline
			errc <- err
		}()
	}
	testenv.Eventually(t, 5*time.Second, "every caller's command received", func() bool { return len(s.Received()) == 1+callers })
	c.Close()
	for range callers {
		select {
		case err := <-errc:
			if !errors.Is(err, qmp.ErrClosed) {
				t.Errorf("QueryMigrate error = %v, want ErrClosed", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a caller is still blocked after Close")
		}
	}
	if _, ok := <-sub.Events(); ok {
		t.Error("subscription channel still open after Close")
	}
	if err := c.Stop(context.Background()); !errors.Is(err, qmp.ErrClosed) {
		t.Errorf("Stop after Close = %v, want ErrClosed", err)
	}
}

func TestConn_ErrorClassPreserved(t *testing.T) {
	s := qmptest.NewServer(t)
	s.Handle("device_del", func(qmptest.Request) (any, error) {
		return nil, &qmp.Error{Class: qmp.ClassDeviceNotFound, Desc: "Device 'nic9' not found"}
	})
	c := dial(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	err := c.DeviceDel(ctx, "nic9")
	var qe *qmp.Error
	if !errors.As(err, &qe) {
		t.Fatalf("DeviceDel error %v is not a *qmp.Error", err)
	}
	if diff := cmp.Diff(&qmp.Error{Class: qmp.ClassDeviceNotFound, Desc: "Device 'nic9' not found"}, qe); diff != "" {
		t.Errorf("error (-want +got):\n%s", diff)
	}
	if !qmp.IsClass(err, qmp.ClassDeviceNotFound) {
		t.Error("IsClass(DeviceNotFound) = false")
	}
	if err := c.Execute(ctx, "no-such-command", nil, nil); !qmp.IsClass(err, qmp.ClassCommandNotFound) {
		t.Errorf("unknown command error = %v, want class CommandNotFound", err)
	}
}

func TestConn_Quit(t *testing.T) {
	s := qmptest.NewServer(t)
	s.Handle("quit", func(qmptest.Request) (any, error) { return nil, qmptest.ErrHangup })
	c := dial(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Quit(ctx); err != nil {
		t.Errorf("Quit when QEMU hangs up = %v, want nil", err)
	}
}

func TestConn_TypedCommandArguments(t *testing.T) {
	bw := int64(10 << 30)
	tests := []struct {
		name string
		call func(context.Context, *qmp.Conn) error
		want string // the request as the server decoded it
	}{
		{"balloon", func(ctx context.Context, c *qmp.Conn) error { return c.Balloon(ctx, 1<<27) },
			`{"execute":"balloon","arguments":{"value":134217728}}`},
		{"migrate", func(ctx context.Context, c *qmp.Conn) error { return c.Migrate(ctx, "unix:/x") },
			`{"execute":"migrate","arguments":{"uri":"unix:/x"}}`},
		{"migrate-incoming", func(ctx context.Context, c *qmp.Conn) error { return c.MigrateIncoming(ctx, "tcp:127.0.0.1:4444") },
			`{"execute":"migrate-incoming","arguments":{"uri":"tcp:127.0.0.1:4444"}}`},
		{"migrate_cancel", func(ctx context.Context, c *qmp.Conn) error { return c.MigrateCancel(ctx) },
			`{"execute":"migrate_cancel"}`},
		{"capabilities", func(ctx context.Context, c *qmp.Conn) error {
			return c.MigrateSetCapabilities(ctx, qmp.MigrationCapability{Capability: "events", State: true})
		}, `{"execute":"migrate-set-capabilities","arguments":{"capabilities":[{"capability":"events","state":true}]}}`},
		{"parameters", func(ctx context.Context, c *qmp.Conn) error {
			return c.MigrateSetParameters(ctx, qmp.MigrationParameters{MaxBandwidth: &bw})
		}, `{"execute":"migrate-set-parameters","arguments":{"max-bandwidth":10737418240}}`},
		{"device_add", func(ctx context.Context, c *qmp.Conn) error {
			return c.DeviceAdd(ctx, "virtio-net-pci", "nic1", map[string]any{"netdev": "n1"})
		}, `{"execute":"device_add","arguments":{"driver":"virtio-net-pci","id":"nic1","netdev":"n1"}}`},
		{"qom-set", func(ctx context.Context, c *qmp.Conn) error {
			return c.SetBalloonStatsInterval(ctx, "/machine/peripheral/balloon0", 5)
		}, `{"execute":"qom-set","arguments":{"path":"/machine/peripheral/balloon0","property":"guest-stats-polling-interval","value":5}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := qmptest.NewServer(t)
			var cmd string
			if err := json.Unmarshal([]byte(tt.want), &struct {
				Execute *string `json:"execute"`
			}{&cmd}); err != nil {
				t.Fatal(err)
			}
			s.Handle(cmd, func(qmptest.Request) (any, error) { return nil, nil })
			c := dial(t, s)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := tt.call(ctx, c); err != nil {
				t.Fatal(err)
			}
			got := s.Received()[1]
			got.ID = nil
			var want qmptest.Request
			if err := json.Unmarshal([]byte(tt.want), &want); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got, cmp.Comparer(jsonEqual)); diff != "" {
				t.Errorf("request (-want +got):\n%s", diff)
			}
		})
	}
}

func TestConn_TypedReplies(t *testing.T) {
	s := qmptest.NewServer(t)
	s.Handle("query-status", func(qmptest.Request) (any, error) {
		return json.RawMessage(`{"status":"paused","singlestep":false,"running":false}`), nil
	})
	s.Handle("qom-get", func(qmptest.Request) (any, error) {
		return json.RawMessage(`{"stats":{"stat-free-memory":1024,"stat-htlb-pgalloc":18446744073709551615},"last-update":17}`), nil
	})
	c := dial(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	st, err := c.QueryStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(qmp.StatusInfo{Status: qmp.RunStatePaused}, st); diff != "" {
		t.Errorf("QueryStatus (-want +got):\n%s", diff)
	}
	bs, err := c.QueryBalloonStats(ctx, "/machine/peripheral/balloon0")
	if err != nil {
		t.Fatal(err)
	}
	want := qmp.BalloonStats{Stats: map[string]int64{"stat-free-memory": 1024, "stat-htlb-pgalloc": -1}, LastUpdate: 17}
	if diff := cmp.Diff(want, bs); diff != "" {
		t.Errorf("QueryBalloonStats (-want +got):\n%s", diff)
	}
}

// jsonEqual compares two JSON documents by value.
func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return string(a) == string(b)
	}
	return cmp.Equal(x, y)
}

func commands(reqs []qmptest.Request) []string {
	var out []string
	for _, r := range reqs {
		out = append(out, r.Command)
	}
	return out
}
