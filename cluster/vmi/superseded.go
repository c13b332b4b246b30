package vmi

import "sync"

// superseded remembers, per VMI key, a version this controller wrote and then
// replaced by a second write of its own in the same sync (the metadata
// update, then the status). The informer delivers both; a sync of the
// first would plan from a status already replaced and earn a Conflict, so
// it is skipped: the event of the second write syncs the VMI.
type superseded struct {
	mu sync.Mutex
	rv map[string]string
}

func newSuperseded() *superseded {
	return &superseded{rv: map[string]string{}}
}

// wrote records that version rv of the VMI is already replaced.
func (s *superseded) wrote(key string, rv string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rv[key] = rv
}

// stale reports whether version rv of the VMI is one this controller
// replaced itself. Any other version ends the entry: the cache has moved
// past it (or someone else wrote).
func (s *superseded) stale(key string, rv string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.rv[key]
	if !ok {
		return false
	}
	if old == rv {
		return true
	}
	delete(s.rv, key)
	return false
}

// forget drops the VMI's entry (the VMI is gone).
func (s *superseded) forget(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.rv, key)
}
