package store

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// index is the in-memory name index: for every record its namespace, name
// and Gone time, so that a lookup by name (every node API request) and
// Prune's search for old tombstones do not decode every record of a store
// that holds hundreds of tombstones.
//
// It is a hint, never the answer: callers read the records it names in a
// transaction and skip what they do not find. It is built by Open from the
// file and changed by write transactions before they commit, under bbolt's
// writer lock, so changes are applied in commit order; a commit that fails
// after its changes were applied makes the DB rebuild the index from the
// file. A reader may therefore briefly see a UID whose record is not
// committed yet (skipped) and never misses a committed one.
type index struct {
	mu     sync.RWMutex
	byUID  map[string]indexEntry
	byName map[nameKey]map[string]struct{}
	// maxSeq is the highest IntentSeq of the records when the file was
	// opened: where the intent log numbers on from if it was lost.
	maxSeq uint64
}

// nameKey is a VMI's namespace and name.
type nameKey struct{ namespace, name string }

// indexEntry is what the index keeps of one record.
type indexEntry struct {
	key  nameKey
	gone time.Time
}

// indexed is the part of a stored record the index decodes.
type indexed struct {
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	Gone      time.Time `json:"gone"`
	IntentSeq uint64    `json:"intentSeq"`
}

// buildIndex reads the namespace, name and Gone time of every record of
// records.
func buildIndex(records *bolt.Bucket) (*index, error) {
	ix := &index{byUID: map[string]indexEntry{}, byName: map[nameKey]map[string]struct{}{}}
	err := records.ForEach(func(k, v []byte) error {
		var r indexed
		if err := json.Unmarshal(v, &r); err != nil {
			return fmt.Errorf("index record %q: %w", k, err)
		}
		ix.set(string(k), indexEntry{key: nameKey{r.Namespace, r.Name}, gone: r.Gone})
		ix.maxSeq = max(ix.maxSeq, r.IntentSeq)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return ix, nil
}

// isLive reports whether the index holds uid as a record that is not a
// tombstone.
func (ix *index) isLive(uid string) bool {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	e, ok := ix.byUID[uid]
	return ok && e.gone.IsZero()
}

// maxIntentSeq returns the highest IntentSeq of the records the index was
// built from.
func (ix *index) maxIntentSeq() uint64 {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.maxSeq
}

// put indexes the record r as written.
func (ix *index) put(r *Record) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.set(r.UID, indexEntry{key: nameKey{r.Namespace, r.Name}, gone: r.Gone})
}

// set indexes uid under e; ix.mu is held (or ix is not shared yet).
func (ix *index) set(uid string, e indexEntry) {
	if old, ok := ix.byUID[uid]; ok && old.key != e.key {
		ix.unname(uid, old.key)
	}
	ix.byUID[uid] = e
	uids := ix.byName[e.key]
	if uids == nil {
		uids = map[string]struct{}{}
		ix.byName[e.key] = uids
	}
	uids[uid] = struct{}{}
}

// remove forgets uid.
func (ix *index) remove(uid string) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if e, ok := ix.byUID[uid]; ok {
		delete(ix.byUID, uid)
		ix.unname(uid, e.key)
	}
}

func (ix *index) unname(uid string, key nameKey) {
	delete(ix.byName[key], uid)
	if len(ix.byName[key]) == 0 {
		delete(ix.byName, key)
	}
}

// refs returns the UID and Gone time of each record indexed under
// namespace/name, sorted by UID.
func (ix *index) refs(namespace, name string) []Ref {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	refs := make([]Ref, 0, len(ix.byName[nameKey{namespace, name}]))
	for uid := range ix.byName[nameKey{namespace, name}] {
		refs = append(refs, Ref{UID: uid, Gone: ix.byUID[uid].gone})
	}
	slices.SortFunc(refs, func(a, b Ref) int { return strings.Compare(a.UID, b.UID) })
	return refs
}

// live returns the UIDs of the records that are not tombstones, sorted.
func (ix *index) live() []string {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	var uids []string
	for uid, e := range ix.byUID {
		if e.gone.IsZero() {
			uids = append(uids, uid)
		}
	}
	slices.Sort(uids)
	return uids
}

// goneBy returns the UIDs of the tombstones gone at or before cutoff,
// sorted.
func (ix *index) goneBy(cutoff time.Time) []string {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	var uids []string
	for uid, e := range ix.byUID {
		if !e.gone.IsZero() && !e.gone.After(cutoff) {
			uids = append(uids, uid)
		}
	}
	slices.Sort(uids)
	return uids
}

// replace makes ix hold what other holds.
func (ix *index) replace(other *index) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.byUID, ix.byName = other.byUID, other.byName
}
