package reconcile

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// ExpectationTTL bounds how long a replica set waits for its creates and
// deletes to show up in the informer cache before it believes the cache.
const ExpectationTTL = 2 * time.Minute

// Expectations remember, per owner key (namespace/name), the creates and
// deletes a controller of replicas (cluster/replicaset, cluster/pool) made
// that the informer has not shown yet. While any
// is outstanding the owner does not scale: a cache that lags behind a burst
// of creates would otherwise make it create the same replicas again.
// Creates are counted (generateName: the names are unknown in advance);
// deletes are remembered by UID, and a delete is seen as soon as the object
// has a deletionTimestamp. Safe for concurrent use.
type Expectations struct {
	mu  sync.Mutex
	now func() time.Time
	by  map[string]*expectation
}

type expectation struct {
	creates int
	deletes map[types.UID]bool
	since   time.Time
}

// NewExpectations returns empty expectations; now defaults to time.Now.
func NewExpectations(now func() time.Time) *Expectations {
	if now == nil {
		now = time.Now
	}
	return &Expectations{now: now, by: map[string]*expectation{}}
}

// Expect records n creates and the deletes of uids about to be sent for key.
func (e *Expectations) Expect(key string, creates int, deletes []types.UID) {
	if creates == 0 && len(deletes) == 0 {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	x := e.by[key]
	if x == nil {
		x = &expectation{deletes: map[types.UID]bool{}}
		e.by[key] = x
	}
	x.creates += creates
	for _, uid := range deletes {
		x.deletes[uid] = true
	}
	x.since = e.now()
}

// Created settles one create for key: the informer showed a new object, or
// the create failed and will never show.
func (e *Expectations) Created(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x := e.by[key]; x != nil && x.creates > 0 {
		x.creates--
	}
}

// Deleted settles the delete of uid for key.
func (e *Expectations) Deleted(key string, uid types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x := e.by[key]; x != nil {
		delete(x.deletes, uid)
	}
}

// Settled reports whether every create and delete recorded for key has
// been seen, or the oldest outstanding one is older than ExpectationTTL.
func (e *Expectations) Settled(key string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	x := e.by[key]
	switch {
	case x == nil:
		return true
	case x.creates <= 0 && len(x.deletes) == 0, e.now().Sub(x.since) > ExpectationTTL:
		delete(e.by, key)
		return true
	}
	return false
}

// Forget drops everything recorded for key (the owner is gone).
func (e *Expectations) Forget(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.by, key)
}
