package api

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nodevirt/nodevirt/store"
)

var errNoRecord = errors.New("no record")

// Resolve finds the record of a VMI given as ns/name or as a UID. By name
// a live record wins over tombstones, then the newest tombstone.
func Resolve(ctx context.Context, recs Records, ref string) (store.Record, error) {
	uid := ref
	if strings.Contains(ref, "/") {
		r, err := resolveRef(ctx, recs, ref)
		if err != nil {
			return store.Record{}, err
		}
		uid = r.UID
	}
	return getRecord(ctx, recs, ref, uid)
}

// getRecord reads the record uid of the VMI ref.
func getRecord(ctx context.Context, recs Records, ref, uid string) (store.Record, error) {
	rec, err := recs.Get(ctx, uid)
	if errors.Is(err, store.ErrNotFound) {
		return store.Record{}, fmt.Errorf("VMI %s: %w", ref, errNoRecord)
	}
	return rec, err
}

// resolveRef chooses the record of a VMI given as ns/name (from the name
// index, decoding no record: every node API request by name comes here) or
// as a UID, as Resolve does.
func resolveRef(ctx context.Context, recs Records, ref string) (store.Ref, error) {
	ns, name, byName := strings.Cut(ref, "/")
	if !byName {
		r, err := getRecord(ctx, recs, ref, ref)
		return store.Ref{UID: r.UID, Gone: r.Gone}, err
	}
	all, err := recs.RefsByName(ctx, ns, name)
	if err != nil {
		return store.Ref{}, err
	}
	var best *store.Ref
	for i := range all {
		r := &all[i]
		if best == nil || better(r, best) {
			best = r
		}
	}
	if best == nil {
		return store.Ref{}, fmt.Errorf("VMI %s: %w", ref, errNoRecord)
	}
	return *best, nil
}

// better reports whether r is a better match than cur for a name.
func better(r, cur *store.Ref) bool {
	if r.IsGone() != cur.IsGone() {
		return !r.IsGone()
	}
	return r.Gone.After(cur.Gone)
}
