package leader

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/ptr"
)

// leaseLog records when the lease was released (its holder cleared).
type leaseLog struct {
	mu       sync.Mutex
	released time.Time
}

func (l *leaseLog) releasedAt() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.released
}

func electConfig(t *testing.T) (leaderelection.LeaderElectionConfig, *leaseLog) {
	t.Helper()
	kube := fake.NewClientset()
	rec := &leaseLog{}
	kube.PrependReactor("update", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		l := a.(k8stesting.UpdateAction).GetObject().(*coordinationv1.Lease)
		if ptr.Deref(l.Spec.HolderIdentity, "") == "" {
			rec.mu.Lock()
			rec.released = time.Now()
			rec.mu.Unlock()
		}
		return false, nil, nil
	})
	return leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{LeaseMeta: metav1.ObjectMeta{Namespace: "nodevirt", Name: "lease"},
			Client: kube.CoordinationV1(), LockConfig: resourcelock.ResourceLockConfig{Identity: "me"}},
		LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 200 * time.Millisecond, Name: "lease",
	}, rec
}

// TestElectedReleasesAfterWork: on shutdown the lease is released only
// once the work returned, however long the work takes to stop.
func TestElectedReleasesAfterWork(t *testing.T) {
	lec, rec := electConfig(t)
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	var stopped time.Time
	errc := make(chan error, 1)
	go func() {
		errc <- Run(ctx, lec, slog.New(slog.NewTextHandler(io.Discard, nil)), func(ctx context.Context) error {
			close(started)
			<-ctx.Done()
			time.Sleep(500 * time.Millisecond) // a sync finishing
			stopped = time.Now()
			return nil
		})
	}()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("never led")
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("elected: %v", err)
	}
	released := rec.releasedAt()
	switch {
	case released.IsZero():
		t.Fatal("the lease was not released")
	case released.Before(stopped):
		t.Errorf("the lease was released %s before the work stopped", stopped.Sub(released))
	}
}

// TestElectedWorkFails: work that fails gives the lease up and its error
// is returned.
func TestElectedWorkFails(t *testing.T) {
	lec, rec := electConfig(t)
	boom := errors.New("boom")
	err := Run(context.Background(), lec, slog.New(slog.NewTextHandler(io.Discard, nil)), func(context.Context) error { return boom })
	if !errors.Is(err, boom) {
		t.Fatalf("elected = %v, want %v", err, boom)
	}
	if rec.releasedAt().IsZero() {
		t.Error("the lease was not released")
	}
}
