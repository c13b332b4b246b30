package leader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"k8s.io/client-go/tools/leaderelection"
)

// ErrLostLease: another replica took the lease while this one led.
var ErrLostLease = errors.New("lost the leader lease")

// Run campaigns for the lease of lec (whose callbacks it sets) and
// runs work while leading. It returns nil when ctx ends, work's error when
// work fails (the lease is given up: never hold it without working), and
// ErrLostLease when the lease is lost.
//
// The lease outlives the work: on ctx's end it is released only once work
// has returned, so a successor never runs alongside a predecessor still
// finishing a sync (each would create what the other's cache does not show
// yet). client-go's ReleaseOnCancel alone releases as ctx ends, without
// waiting for the callback.
func Run(ctx context.Context, lec leaderelection.LeaderElectionConfig, log *slog.Logger, work func(context.Context) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var leading leaderState
	electorCtx, releaseLease := context.WithCancel(context.WithoutCancel(ctx))
	defer releaseLease()
	go func() {
		<-ctx.Done()
		leading.wait()
		log.Info("controllers stopped; releasing the lease")
		releaseLease()
	}()
	var lost bool
	lec.ReleaseOnCancel = true
	lec.Callbacks = leaderelection.LeaderCallbacks{
		OnStartedLeading: func(lctx context.Context) {
			log.Info("became leader", "identity", lec.Lock.Identity())
			done := leading.start()
			defer close(done)
			// The work stops when the lease is lost or ctx ends.
			lctx, stop := context.WithCancel(lctx)
			defer stop()
			defer context.AfterFunc(ctx, stop)()
			if err := work(lctx); err != nil && lctx.Err() == nil {
				leading.fail(err)
				cancel()
			}
		},
		OnStoppedLeading: func() {
			if ctx.Err() == nil && leading.err() == nil {
				lost = true
			}
			cancel()
		},
		OnNewLeader: func(id string) { log.Info("leader", "identity", id) },
	}
	elector, err := leaderelection.NewLeaderElector(lec)
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	elector.Run(electorCtx)
	cancel()
	leading.wait()
	switch {
	case leading.err() != nil:
		return fmt.Errorf("leading: %w", leading.err())
	case lost:
		return ErrLostLease
	}
	return nil
}

// leaderState lets Run wait for the controllers started by the leader
// election callback (client-go does not wait for them) and see their error.
type leaderState struct {
	mu      sync.Mutex
	done    chan struct{}
	failure error
}

func (l *leaderState) start() chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.done = make(chan struct{})
	return l.done
}

func (l *leaderState) fail(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failure = err
}

func (l *leaderState) err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failure
}

// wait returns when the controllers have stopped (at once if they never ran).
func (l *leaderState) wait() {
	l.mu.Lock()
	done := l.done
	l.mu.Unlock()
	if done != nil {
		<-done
	}
}
