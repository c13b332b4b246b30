package vmi

import (
	"slices"
	"sync"
)

// superseded remembers, per VMI key, the versions this controller wrote
// over in its last sync: the one it planned from, and the one its metadata
// update made before the status write. The informer still delivers them;
// a sync of one would plan from a state already replaced and earn a
// Conflict, so it is skipped: the event of the last write syncs the VMI.
type superseded struct {
	mu sync.Mutex
	rv map[string][]string
}

func newSuperseded() *superseded {
	return &superseded{rv: map[string][]string{}}
}

// wrote records that version rv of the VMI is already replaced by a write
// of this controller.
func (s *superseded) wrote(key, rv string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rv[key] = append(s.rv[key], rv)
}

// stale reports whether version rv of the VMI is one this controller
// replaced itself. Any other version ends the entry: the cache has moved
// past them (or someone else wrote).
func (s *superseded) stale(key, rv string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.rv[key]
	if !ok {
		return false
	}
	if slices.Contains(old, rv) {
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
