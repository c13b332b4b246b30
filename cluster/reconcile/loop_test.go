package reconcile

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/nodevirt/nodevirt/hack/testenv"
)

// countingSyncer fails each key's first failures syncs, then succeeds.
type countingSyncer struct {
	mu       sync.Mutex
	calls    map[string]int
	failures int
	done     chan string
}

func (s *countingSyncer) Sync(_ context.Context, key string) error {
	s.mu.Lock()
	s.calls[key]++
	n := s.calls[key]
	s.mu.Unlock()
	if n <= s.failures {
		return errors.New("transient")
	}
	s.done <- key
	return nil
}

func TestLoop_RetriesUntilSuccess(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	s := &countingSyncer{calls: map[string]int{}, failures: 2, done: make(chan string, 10)}
	l := New("test", s, slog.New(slog.NewTextHandler(io.Discard, nil)), m)
	ctx, cancel := context.WithCancel(context.Background())
	finished := make(chan struct{})
	go func() { l.Run(ctx, 2); close(finished) }()
	l.EnqueueKey("ns/a")
	l.EnqueueAfter("ns/b", 10*time.Millisecond)
	got := map[string]bool{}
	deadline := time.After(10 * time.Second)
	for len(got) < 2 {
		select {
		case k := <-s.done:
			got[k] = true
		case <-deadline:
			t.Fatalf("keys synced successfully: %v, want ns/a and ns/b", got)
		}
	}
	cancel()
	<-finished
	if s.calls["ns/a"] != 3 {
		t.Errorf("ns/a synced %d times, want 3 (two failures, one success)", s.calls["ns/a"])
	}
	var retries dto.Metric
	if err := m.retries.WithLabelValues("test").Write(&retries); err != nil {
		t.Fatal(err)
	}
	if n := retries.GetCounter().GetValue(); n != 5 { // 4 backoffs + the AddAfter
		t.Errorf("retries metric = %v, want 5", n)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "nodevirt_controller_sync_duration_seconds" && len(f.GetMetric()) != 2 {
			t.Errorf("sync histogram series = %d, want 2 (success, error)", len(f.GetMetric()))
		}
	}
}

func TestNewMetrics_RegistersOnce(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := NewMetrics(reg); err != nil {
		t.Fatal(err)
	}
	if _, err := NewMetrics(reg); err == nil {
		t.Fatal("second registration on one registry succeeded, want an error")
	}
}

// scriptSyncer returns the next error of its key's script on each sync
// (nil once the script is used up) and reports each call on calls.
type scriptSyncer struct {
	mu      sync.Mutex
	scripts map[string][]error
	calls   chan string
}

func (s *scriptSyncer) Sync(_ context.Context, key string) error {
	s.mu.Lock()
	var err error
	if q := s.scripts[key]; len(q) > 0 {
		err, s.scripts[key] = q[0], q[1:]
	}
	s.mu.Unlock()
	s.calls <- key
	return err
}

// waitCalls receives n sync calls or fails the test.
func waitCalls(t *testing.T, calls <-chan string, n int) []string {
	t.Helper()
	var got []string
	deadline := time.After(10 * time.Second)
	for len(got) < n {
		select {
		case k := <-calls:
			got = append(got, k)
		case <-deadline:
			t.Fatalf("syncs = %v, want %d", got, n)
		}
	}
	return got
}

// TestLoop_AgentShape covers what the node agent uses: no loop metrics, an
// observer of its own, UID keys logged as "uid", conflicts at Debug and
// other failures at Error.
func TestLoop_AgentShape(t *testing.T) {
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "virtualmachineinstances"}, "a", errors.New("modified"))
	s := &scriptSyncer{
		scripts: map[string][]error{"uid-1": {conflict}, "uid-2": {errors.New("launch failed")}},
		calls:   make(chan string, 10),
	}
	var logs testenv.LockedBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var mu sync.Mutex
	results := map[string]int{}
	l := New("vmi", s, log, nil, WithKeyAttr("uid"), WithObserver(func(took time.Duration, err error) {
		mu.Lock()
		defer mu.Unlock()
		if took < 0 {
			t.Errorf("observed duration %v < 0", took)
		}
		if err != nil {
			results["error"]++
		} else {
			results["ok"]++
		}
	}))
	ctx, cancel := context.WithCancel(context.Background())
	finished := make(chan struct{})
	go func() { l.Run(ctx, 2); close(finished) }()
	l.EnqueueKey("uid-1")
	l.EnqueueKey("uid-2")
	waitCalls(t, s.calls, 4) // each key: one failure, one success after backoff
	cancel()
	<-finished

	mu.Lock()
	if results["error"] != 2 || results["ok"] != 2 {
		t.Errorf("observer results = %v, want 2 error and 2 ok", results)
	}
	mu.Unlock()
	out := logs.String()
	for _, want := range []string{
		`level=DEBUG msg="sync conflicted, requeued" controller=vmi uid=uid-1`,
		`level=ERROR msg="sync failed, requeued" controller=vmi uid=uid-2`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "level=ERROR msg=\"sync failed, requeued\" controller=vmi uid=uid-1") {
		t.Errorf("a conflict was logged at Error:\n%s", out)
	}
}

// blockingSyncer blocks each sync until release is closed.
type blockingSyncer struct {
	started chan string
	release chan struct{}
}

func (s *blockingSyncer) Sync(ctx context.Context, key string) error {
	s.started <- key
	<-s.release
	return nil
}

// TestLoop_RunFinishesCurrentKey: when ctx ends, Run waits for the key in
// flight and no worker takes another.
func TestLoop_RunFinishesCurrentKey(t *testing.T) {
	s := &blockingSyncer{started: make(chan string, 10), release: make(chan struct{})}
	l := New("test", s, nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	finished := make(chan struct{})
	go func() { l.Run(ctx, 1); close(finished) }()
	l.EnqueueKey("a")
	waitCalls(t, s.started, 1)
	l.EnqueueKey("b")
	cancel()
	select {
	case <-finished:
		t.Fatal("Run returned while a sync was in flight")
	case <-time.After(50 * time.Millisecond):
	}
	close(s.release)
	select {
	case <-finished:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after the sync in flight finished")
	}
	select {
	case k := <-s.started:
		t.Errorf("key %q synced after ctx ended", k)
	default:
	}
}

func TestHandlerFunc(t *testing.T) {
	var got []any
	h := HandlerFunc(func(obj any) { got = append(got, obj) })
	h.OnAdd("add", false)
	h.OnUpdate("old", "new")
	h.OnDelete("del")
	if want := []any{"add", "new", "del"}; len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("handler calls = %v, want %v", got, want)
	}
}

func TestSyncFunc(t *testing.T) {
	var got string
	var s Syncer = SyncFunc(func(_ context.Context, key string) error { got = key; return nil })
	if err := s.Sync(context.Background(), "ns/x"); err != nil || got != "ns/x" {
		t.Errorf("SyncFunc.Sync = %v with key %q, want nil with ns/x", err, got)
	}
}

// TestRateLimiter_Capped: a key that keeps failing is retried at most
// maxBackoff apart (client-go's default would wait up to 1000 s), and a
// success (Forget) starts its backoff over.
func TestRateLimiter_Capped(t *testing.T) {
	rl := rateLimiter()
	var last time.Duration
	for i := range 40 {
		d := rl.When("ns/stuck")
		if d > maxBackoff {
			t.Fatalf("failure %d: backoff %v, want at most %v", i+1, d, maxBackoff)
		}
		last = d
	}
	if last != maxBackoff {
		t.Errorf("after 40 failures: backoff %v, want the cap %v", last, maxBackoff)
	}
	rl.Forget("ns/stuck")
	if d := rl.When("ns/stuck"); d != minBackoff {
		t.Errorf("after Forget: backoff %v, want %v", d, minBackoff)
	}
}
