package reconcile

import (
	"context"
	"log/slog"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// Syncer reconciles one object, named by its namespace/name key.
type Syncer interface {
	Sync(ctx context.Context, key string) error
}

// Loop is a named work queue of object keys and the workers draining it.
type Loop struct {
	name    string
	queue   workqueue.TypedRateLimitingInterface[string]
	syncer  Syncer
	log     *slog.Logger
	metrics *Metrics
}

// New returns a Loop named name (used in logs and metric labels) that calls
// syncer for every queued key, recording into m.
func New(name string, syncer Syncer, log *slog.Logger, m *Metrics) *Loop {
	q := workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: name, MetricsProvider: m.provider(name)},
	)
	return &Loop{name: name, queue: q, syncer: syncer, log: log.With("controller", name), metrics: m}
}

// Enqueue adds the key of obj (an API object or a cache tombstone).
func (l *Loop) Enqueue(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		l.log.Error("cannot compute object key", "err", err)
		return
	}
	l.queue.Add(key)
}

// EnqueueKey adds a namespace/name key.
func (l *Loop) EnqueueKey(key string) { l.queue.Add(key) }

// EnqueueAfter adds key once d has passed.
func (l *Loop) EnqueueAfter(key string, d time.Duration) { l.queue.AddAfter(key, d) }

// Handler returns informer event handlers that enqueue the changed object.
func (l *Loop) Handler() cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    l.Enqueue,
		UpdateFunc: func(_, obj any) { l.Enqueue(obj) },
		DeleteFunc: l.Enqueue,
	}
}

// SetSyncer sets the syncer when it is built after the loop (because it
// needs the loop as its delayed-requeue target). Call before Run.
func (l *Loop) SetSyncer(s Syncer) { l.syncer = s }

// Len is the number of keys waiting (not counting delayed ones).
func (l *Loop) Len() int { return l.queue.Len() }

// Run starts workers goroutines and blocks until ctx is done; then it shuts
// the queue down and waits for the workers to finish their current key.
func (l *Loop) Run(ctx context.Context, workers int) {
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for l.next(ctx) {
			}
		}()
	}
	<-ctx.Done()
	l.queue.ShutDown()
	wg.Wait()
}

func (l *Loop) next(ctx context.Context) bool {
	key, shutdown := l.queue.Get()
	if shutdown {
		return false
	}
	defer l.queue.Done(key)
	start := time.Now()
	err := l.syncer.Sync(ctx, key)
	l.metrics.observeSync(l.name, time.Since(start), err)
	if err != nil {
		switch {
		case ctx.Err() != nil:
		case apierrors.IsConflict(err):
			// Another writer (the agent, a user) changed the object: normal.
			l.log.Debug("sync conflicted, requeued", "key", key, "err", err)
		default:
			l.log.Error("sync failed, requeued", "key", key, "retries", l.queue.NumRequeues(key), "err", err)
		}
		l.queue.AddRateLimited(key)
		return true
	}
	l.queue.Forget(key)
	return true
}
