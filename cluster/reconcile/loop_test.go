package reconcile

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
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
