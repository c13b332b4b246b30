package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// MarkGone turns the record uid into a tombstone, gone since at, and appends
// events to its timeline. A record already gone keeps its first Gone time,
// so retention counts from when the VMI really went away.
func (db *DB) MarkGone(ctx context.Context, uid string, at time.Time, events ...Event) (Record, error) {
	r, err := db.Update(ctx, uid, func(r *Record) error {
		if !r.IsGone() {
			r.Gone = at
		}
		return nil
	}, events...)
	if err != nil {
		return Record{}, fmt.Errorf("mark gone: %w", err)
	}
	return r, nil
}

// Prune removes the tombstones that have been gone for at least
// Options.Retention at now, with their timelines, in one transaction. It
// returns the UIDs it removed, in order.
func (db *DB) Prune(ctx context.Context, now time.Time) ([]string, error) {
	cutoff := now.Add(-db.opts.Retention)
	var pruned []string
	err := db.update(ctx, func(b buckets) error {
		// The index names the candidates; each is checked on the record.
		for _, uid := range b.ix.goneBy(cutoff) {
			r, err := b.get(uid)
			if errors.Is(err, ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			if !r.IsGone() || r.Gone.After(cutoff) {
				continue
			}
			if err := b.delete(uid); err != nil {
				return fmt.Errorf("delete %q: %w", uid, err)
			}
			pruned = append(pruned, uid)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("prune records gone before %v: %w", cutoff, err)
	}
	return pruned, nil
}
