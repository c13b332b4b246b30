package vmi

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// expectationTTL bounds how long a created pod may be missing from the
// informer cache before the controller believes the cache.
const expectationTTL = 30 * time.Second

// expectations remember launcher pods this controller created that the pod
// informer has not shown yet, so a lagging cache never causes a second pod.
type expectations struct {
	mu      sync.Mutex
	pending map[types.UID]time.Time
}

func newExpectations() *expectations {
	return &expectations{pending: map[types.UID]time.Time{}}
}

// created records that a pod for the VMI was just created.
func (e *expectations) created(vmi types.UID, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.pending[vmi] = now
}

// observed is called when the informer shows a pod of the VMI.
func (e *expectations) observed(vmi types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.pending, vmi)
}

// waiting reports whether a created pod has not shown up yet.
func (e *expectations) waiting(vmi types.UID, now time.Time) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	t, ok := e.pending[vmi]
	if ok && now.Sub(t) > expectationTTL {
		delete(e.pending, vmi)
		return false
	}
	return ok
}
