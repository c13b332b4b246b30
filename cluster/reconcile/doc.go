// Package reconcile is the one work loop of nodevirt, shared by the cluster
// controller and the node agent, in the shape of
// kubernetes/sample-controller: event handlers add keys to a typed
// rate-limited workqueue, N workers take keys off it and call
// Syncer.Sync(ctx, key).
//
// It is a library, not a controller: it knows no API type, so node/agent
// may import it (DESIGN.md's rule "node never imports the controllers in
// cluster/" is about cluster/vm, cluster/vmi, cluster/node and
// cluster/controller). The controllers key by namespace/name ([Loop.Enqueue],
// [Loop.Handler]); the agent keys by VMI UID, computes its keys itself and
// adds them with [Loop.EnqueueKey] ([HandlerFunc] builds its informer
// handlers).
//
// Contract of Sync: it reads from informer caches, never mutates cached
// objects, and is idempotent (a crash between any two API writes is
// repaired by the next Sync). A returned error requeues the key with
// per-key exponential backoff (5 ms doubling, capped at 30 s, where
// client-go's default cap is 1000 s: syncs enforce deadlines that only a
// sync notices) and is logged once, here: at Error, except a
// conflict (apierrors.IsConflict: another writer won a race), which is
// normal and logged at Debug. nil forgets the key's failure history. A Sync
// that wants to look again later without failing (a crash-loop backoff, a
// heartbeat deadline, a guest still starting) calls [Loop.EnqueueAfter].
//
// [Expectations] is the bookkeeping of controllers that create and delete
// replicas (cluster/replicaset, cluster/pool): creates and deletes sent but
// not yet seen by the informer, so a lagging cache never causes a second
// round of them.
//
// Metrics, registered on the injected prometheus.Registerer and labelled
// with the loop's name: nodevirt_controller_queue_depth,
// nodevirt_controller_queue_adds_total, nodevirt_controller_queue_retries_total
// and the nodevirt_controller_sync_duration_seconds histogram (label
// result=success|conflict|error). A loop built with nil Metrics exports none;
// [WithObserver] hands each sync's duration and result to metrics of the
// caller's own (the agent's nodevirt_agent_reconcile_duration_seconds).
//
// Concurrency: Run blocks until ctx is done, shuts the queue down and waits
// for in-flight syncs to return; keys still queued are dropped, and a
// worker whose sync returns after ctx ended takes no further key. Enqueue
// methods are safe from any goroutine.
package reconcile
