package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Get returns the record of the VMI with the given UID, tombstone or not.
func (db *DB) Get(ctx context.Context, uid string) (Record, error) {
	// The pending intent is read before the transaction starts: one folded
	// meanwhile is in the record the transaction reads.
	e, pending := db.log.lookup(uid)
	var r Record
	err := db.view(ctx, func(b buckets) error {
		var err error
		r, err = b.get(uid)
		return err
	})
	if err != nil {
		return Record{}, fmt.Errorf("get record %q: %w", uid, err)
	}
	if pending {
		e.overlay(&r)
	}
	return r, nil
}

// List returns every record, tombstones included, ordered by UID.
func (db *DB) List(ctx context.Context) ([]Record, error) {
	pending := db.log.all() // before the transaction, as in Get
	var rs []Record
	err := db.view(ctx, func(b buckets) error {
		return b.records.ForEach(func(k, v []byte) error {
			r, err := decodeRecord(string(k), v)
			if err != nil {
				return err
			}
			rs = append(rs, r)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("list records: %w", err)
	}
	for _, e := range pending {
		if i, ok := slices.BinarySearchFunc(rs, e.UID, func(r Record, uid string) int { return strings.Compare(r.UID, uid) }); ok {
			e.overlay(&rs[i])
		}
	}
	return rs, nil
}

// Ref names one record of a VMI and says whether it is a tombstone: what
// choosing among the records of a name needs, without decoding them.
type Ref struct {
	UID  string
	Gone time.Time // zero for a live record
}

// IsGone reports whether the record is a tombstone.
func (r Ref) IsGone() bool { return !r.Gone.IsZero() }

// RefsByName returns a Ref of each record of the VMI namespace/name,
// tombstones included, ordered by UID, from the name index: it decodes no
// record (a node API request by name costs no JSON). Every UID returned has
// a committed record; its Gone time may be one a write transaction is
// about to commit.
func (db *DB) RefsByName(ctx context.Context, namespace, name string) ([]Ref, error) {
	var refs []Ref
	err := db.view(ctx, func(b buckets) error {
		for _, r := range b.ix.refs(namespace, name) {
			if b.records.Get([]byte(r.UID)) != nil {
				refs = append(refs, r)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("records of %s/%s: %w", namespace, name, err)
	}
	return refs, nil
}

// LiveUIDs returns the UIDs of the records that are not tombstones,
// sorted, without reading any record (from the name index): what the
// agent re-adopts after a restart, however many tombstones the file
// holds. A record committed concurrently may be missing.
func (db *DB) LiveUIDs() []string { return db.ix.live() }

// Put creates or replaces the record r.UID and appends events to its
// timeline, in one transaction.
func (db *DB) Put(ctx context.Context, r Record, events ...Event) error {
	err := db.update(ctx, func(b buckets) error {
		b.absorb(&r)
		if err := b.put(&r); err != nil {
			return err
		}
		return b.appendEvents(r.UID, append(b.absorbedEvents(r.UID), events...), db.opts.TimelineLimit)
	})
	if err != nil {
		return fmt.Errorf("put record %q: %w", r.UID, err)
	}
	return nil
}

// Update reads the record uid, lets fn change it and writes it back with
// events appended to its timeline, all in one transaction. If fn returns an
// error nothing is written and Update returns that error, wrapped. Update
// returns the record as written.
//
// This is how intent is recorded before a side effect: change the Intent in
// fn, and act only after Update returns nil. fn must not call methods of db.
func (db *DB) Update(ctx context.Context, uid string, fn func(*Record) error, events ...Event) (Record, error) {
	var r Record
	err := db.update(ctx, func(b buckets) error {
		var err error
		if r, err = b.get(uid); err != nil {
			return err
		}
		b.absorb(&r)
		if err := fn(&r); err != nil {
			return err
		}
		if r.UID != uid {
			return fmt.Errorf("update changed UID to %q: %w", r.UID, ErrInvalid)
		}
		if err := b.put(&r); err != nil {
			return err
		}
		return b.appendEvents(uid, append(b.absorbedEvents(uid), events...), db.opts.TimelineLimit)
	})
	if err != nil {
		return Record{}, fmt.Errorf("update record %q: %w", uid, err)
	}
	return r, nil
}

// Delete removes the record uid and its timeline at once, with no
// tombstone. Deleting an absent record is not an error.
func (db *DB) Delete(ctx context.Context, uid string) error {
	err := db.update(ctx, func(b buckets) error { return b.delete(uid) })
	if err != nil {
		return fmt.Errorf("delete record %q: %w", uid, err)
	}
	return nil
}

func (b buckets) get(uid string) (Record, error) {
	v := b.records.Get([]byte(uid))
	if v == nil {
		return Record{}, ErrNotFound
	}
	return decodeRecord(uid, v)
}

func (b buckets) put(r *Record) error {
	if r.UID == "" {
		return fmt.Errorf("empty UID: %w", ErrInvalid)
	}
	v, err := encodeRecord(r)
	if err != nil {
		return err
	}
	if err := b.records.Put([]byte(r.UID), v); err != nil {
		return err
	}
	*b.indexed = true
	b.ix.put(r)
	return nil
}

func (b buckets) delete(uid string) error {
	if err := b.records.Delete([]byte(uid)); err != nil {
		return err
	}
	*b.indexed = true
	b.ix.remove(uid)
	if e, ok := b.log.lookup(uid); ok {
		*b.absorbed = append(*b.absorbed, e) // its record is gone
	}
	return b.deleteTimeline(uid)
}
