package heartbeat

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// call is one Patch the fake received.
type call struct {
	Node     string
	Type     types.PatchType
	Patch    string
	CtxAlive bool // the context was not cancelled when Patch was called
}

// fakeNodes records patches; the first failures calls fail.
type fakeNodes struct {
	calls    chan call
	failures int
}

func (f *fakeNodes) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, _ metav1.PatchOptions, _ ...string) (*corev1.Node, error) {
	f.calls <- call{Node: name, Type: pt, Patch: string(data), CtxAlive: ctx.Err() == nil}
	if f.failures > 0 {
		f.failures--
		return nil, errors.New("apiserver unavailable")
	}
	return &corev1.Node{}, nil
}

func TestRun_BeatsRetriesAndStopsUnschedulable(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	nodes := &fakeNodes{calls: make(chan call, 100), failures: 1}
	h, err := New(Config{NodeName: "n0", Interval: 10 * time.Millisecond, Now: func() time.Time { return now }}, nodes)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()

	alive := call{Node: "n0", Type: types.MergePatchType, Patch: string(Patch(true, true, now, nil)), CtxAlive: true}
	// The first patch fails; Run keeps beating.
	for i := range 3 {
		if diff := cmp.Diff(alive, next(t, nodes.calls)); diff != "" {
			t.Fatalf("beat %d mismatch (-want +got):\n%s", i, diff)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run() = %v, want nil", err)
	}
	// Drain beats that raced with cancel; the last call is the stop patch.
	var last call
	for len(nodes.calls) > 0 {
		last = <-nodes.calls
	}
	stop := call{Node: "n0", Type: types.MergePatchType, Patch: string(Patch(false, false, now, nil)), CtxAlive: true}
	if diff := cmp.Diff(stop, last); diff != "" {
		t.Errorf("stop patch mismatch (-want +got):\n%s", diff)
	}
}

func next(t *testing.T, calls <-chan call) call {
	t.Helper()
	select {
	case c := <-calls:
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("no patch within 10s")
		return call{}
	}
}
