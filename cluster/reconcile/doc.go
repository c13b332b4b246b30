// Package reconcile runs the worker side of a controller in the shape of
// kubernetes/sample-controller: event handlers add namespace/name keys to a
// typed rate-limited workqueue, N workers take keys off it and call
// Syncer.Sync(ctx, key).
//
// Contract of Sync: it reads from informer caches, never mutates cached
// objects, and is idempotent (a crash between any two API writes is
// repaired by the next Sync). A returned error requeues the key with
// per-key exponential backoff and is logged once, here; nil forgets the
// key's failure history. A Sync that wants to look again later without
// failing (a crash-loop backoff, a heartbeat deadline) calls
// [Loop.EnqueueAfter].
//
// Metrics, registered on the injected prometheus.Registerer and labelled
// with the loop's name: nodevirt_controller_queue_depth,
// nodevirt_controller_queue_adds_total, nodevirt_controller_queue_retries_total
// and the nodevirt_controller_sync_duration_seconds histogram (label
// result=success|error).
//
// Concurrency: Run blocks until ctx is done, shuts the queue down and waits
// for in-flight syncs to return. Enqueue methods are safe from any goroutine.
package reconcile
