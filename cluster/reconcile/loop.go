package reconcile

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/time/rate"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// Retry backoff of a failing key: exponential from minBackoff, capped at
// maxBackoff, under an overall bucket of retryQPS (burst retryBurst).
// client-go's default caps a key at 1000 s. Syncs here enforce deadlines
// (a migration's progressTimeout, a pending target pod, a crash-loop
// backoff) that only a sync can notice, so a key that failed again and
// again — through an API server outage, or conflicting with a busy writer
// — must be looked at again within a bounded time even when no event for
// it ever arrives.
const (
	minBackoff = 5 * time.Millisecond
	maxBackoff = 30 * time.Second
	retryQPS   = 10
	retryBurst = 100
)

// rateLimiter is the retry backoff of every Loop's queue.
func rateLimiter() workqueue.TypedRateLimiter[string] {
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](minBackoff, maxBackoff),
		&workqueue.TypedBucketRateLimiter[string]{Limiter: rate.NewLimiter(rate.Limit(retryQPS), retryBurst)},
	)
}

// Syncer reconciles the object named by key.
type Syncer interface {
	Sync(ctx context.Context, key string) error
}

// SyncFunc adapts a function to Syncer.
type SyncFunc func(ctx context.Context, key string) error

// Sync calls f.
func (f SyncFunc) Sync(ctx context.Context, key string) error { return f(ctx, key) }

// Loop is a named work queue of object keys and the workers draining it.
type Loop struct {
	name    string
	queue   workqueue.TypedRateLimitingInterface[string]
	syncer  Syncer
	log     *slog.Logger
	metrics *Metrics
	opts    options
}

// New returns a Loop named name (used in logs and metric labels) that calls
// syncer for every queued key, recording into m (nil: no loop metrics).
func New(name string, syncer Syncer, log *slog.Logger, m *Metrics, opts ...Option) *Loop {
	o := options{keyAttr: "key"}
	for _, opt := range opts {
		opt(&o)
	}
	cfg := workqueue.TypedRateLimitingQueueConfig[string]{Name: name}
	if m != nil {
		cfg.MetricsProvider = m.provider(name)
	}
	q := workqueue.NewTypedRateLimitingQueueWithConfig(rateLimiter(), cfg)
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Loop{name: name, queue: q, syncer: syncer, log: log.With("controller", name), metrics: m, opts: o}
}

// Enqueue adds the namespace/name key of obj (an API object or a cache
// tombstone).
func (l *Loop) Enqueue(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		l.log.Error("cannot compute object key", "err", err)
		return
	}
	l.queue.Add(key)
}

// EnqueueKey adds key.
func (l *Loop) EnqueueKey(key string) { l.queue.Add(key) }

// EnqueueAfter adds key once d has passed.
func (l *Loop) EnqueueAfter(key string, d time.Duration) { l.queue.AddAfter(key, d) }

// Handler returns informer event handlers that enqueue the changed object
// by its namespace/name key.
func (l *Loop) Handler() cache.ResourceEventHandlerFuncs { return HandlerFunc(l.Enqueue) }

// HandlerFunc returns informer event handlers that call f with the added,
// updated (new version) or deleted object (possibly a tombstone). Loops
// keyed by something else than namespace/name compute their key in f.
func HandlerFunc(f func(obj any)) cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    f,
		UpdateFunc: func(_, obj any) { f(obj) },
		DeleteFunc: f,
	}
}

// SetSyncer sets the syncer when it is built after the loop (because it
// needs the loop as its delayed-requeue target). Call before Run.
func (l *Loop) SetSyncer(s Syncer) { l.syncer = s }

// Len is the number of keys waiting (not counting delayed ones).
func (l *Loop) Len() int { return l.queue.Len() }

// ShutDown stops the queue; Run calls it when ctx ends. An owner whose
// start fails before it calls Run calls it to release the queue.
func (l *Loop) ShutDown() { l.queue.ShutDown() }

// Run starts workers goroutines and blocks until ctx is done; then it shuts
// the queue down and waits for the workers to finish their current key.
// Keys still queued then are dropped: the next process resyncs them.
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

// next syncs one key; false stops the worker.
func (l *Loop) next(ctx context.Context) bool {
	key, shutdown := l.queue.Get()
	if shutdown {
		return false
	}
	defer l.queue.Done(key)
	if ctx.Err() != nil {
		return false
	}
	start := time.Now()
	err := l.syncer.Sync(ctx, key)
	took := time.Since(start)
	if l.metrics != nil {
		l.metrics.observeSync(l.name, took, err)
	}
	if l.opts.observe != nil {
		l.opts.observe(took, err)
	}
	if ctx.Err() != nil {
		return false
	}
	if err != nil {
		if apierrors.IsConflict(err) {
			// Another writer (the agent, a user) changed the object: normal.
			l.log.Debug("sync conflicted, requeued", l.opts.keyAttr, key, "err", err)
		} else {
			l.log.Error("sync failed, requeued", l.opts.keyAttr, key, "retries", l.queue.NumRequeues(key), "took", took, "err", err)
		}
		l.queue.AddRateLimited(key)
		return true
	}
	l.queue.Forget(key)
	return true
}
