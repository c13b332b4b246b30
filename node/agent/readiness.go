package agent

import (
	"errors"
	"fmt"
	"sync"
)

// readiness tracks an agent's start: it is ready once its informers have
// listed and every record live in the store at that moment has been
// synced once. A restarted agent is therefore ready when it has
// re-adopted its VMs (the first sync of a running domain attaches to its
// QEMU), which is what the DaemonSet's readiness probe (/readyz) waits for
// before a rolling update moves on to the next node. A sync that failed
// counts too: a VM whose QEMU cannot be reached is reported on the VMI,
// and must not hold every later agent rollout back.
type readiness struct {
	mu      sync.Mutex
	started bool
	total   int
	pending map[string]struct{}
}

// errNotListed is Ready's answer until the informers have listed.
var errNotListed = errors.New("informers not synced")

// start records the live records found once the informers listed.
func (r *readiness) start(uids []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.started, r.total = true, len(uids)
	r.pending = make(map[string]struct{}, len(uids))
	for _, uid := range uids {
		r.pending[uid] = struct{}{}
	}
}

// synced records that a sync of uid finished.
func (r *readiness) synced(uid string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.pending, uid)
}

// err is nil when ready, else why not.
func (r *readiness) err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.started {
		return errNotListed
	}
	if n := len(r.pending); n > 0 {
		return fmt.Errorf("re-adopting: %d of %d domains not synced yet", n, r.total)
	}
	return nil
}

// Ready is nil once the agent has listed its informers and synced every
// record live in its store when it started; else it says what is left.
func (a *Agent) Ready() error { return a.ready.err() }
