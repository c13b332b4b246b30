package store

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Event is one entry of a record's lifecycle timeline.
type Event struct {
	// Seq numbers a record's events from 1 in the order they were appended.
	// The store sets it; it keeps counting when old events are dropped.
	Seq     uint64    `json:"seq"`
	Time    time.Time `json:"time"`
	Reason  string    `json:"reason"` // CamelCase, e.g. "PauseRequested"
	Message string    `json:"message,omitzero"`
}

// AppendEvent appends events to the timeline of the record uid, dropping the
// oldest events beyond Options.TimelineLimit. The record must exist.
func (db *DB) AppendEvent(ctx context.Context, uid string, events ...Event) error {
	err := db.update(ctx, func(b buckets) error {
		if b.records.Get([]byte(uid)) == nil {
			return ErrNotFound
		}
		return b.appendEvents(uid, events, db.opts.TimelineLimit)
	})
	if err != nil {
		return fmt.Errorf("append events to %q: %w", uid, err)
	}
	return nil
}

// Timeline returns the timeline of the record uid, oldest event first.
func (db *DB) Timeline(ctx context.Context, uid string) ([]Event, error) {
	var evs []Event
	err := db.view(ctx, func(b buckets) error {
		if b.records.Get([]byte(uid)) == nil {
			return ErrNotFound
		}
		tl := b.timelines.Bucket([]byte(uid))
		if tl == nil {
			return nil
		}
		return tl.ForEach(func(k, v []byte) error {
			var ev Event
			if err := json.Unmarshal(v, &ev); err != nil {
				return fmt.Errorf("decode event %d: %w", binary.BigEndian.Uint64(k), err)
			}
			evs = append(evs, ev)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("timeline of %q: %w", uid, err)
	}
	return evs, nil
}

// appendEvents writes events under keys from the timeline bucket's sequence
// and then drops events older than the last limit. Keys are big-endian, so
// bbolt's byte order is numeric order and the events to drop are the first
// keys: trimming touches only what it deletes.
func (b buckets) appendEvents(uid string, events []Event, limit int) error {
	if len(events) == 0 {
		return nil
	}
	tl, err := b.timelines.CreateBucketIfNotExists([]byte(uid))
	if err != nil {
		return fmt.Errorf("create timeline bucket: %w", err)
	}
	for _, ev := range events {
		if ev.Seq, err = tl.NextSequence(); err != nil {
			return err
		}
		v, err := json.Marshal(ev)
		if err != nil {
			return fmt.Errorf("encode event %q: %w", ev.Reason, err)
		}
		if err := tl.Put(seqKey(ev.Seq), v); err != nil {
			return err
		}
	}
	return trimTimeline(tl, limit)
}

func trimTimeline(tl *bolt.Bucket, limit int) error {
	last := tl.Sequence()
	if last <= uint64(limit) {
		return nil
	}
	keep := last - uint64(limit) + 1 // first seq to keep
	c := tl.Cursor()
	// Re-seek after each delete rather than trust Next over a deleted key.
	for k, _ := c.First(); k != nil && binary.BigEndian.Uint64(k) < keep; k, _ = c.First() {
		if err := c.Delete(); err != nil {
			return err
		}
	}
	return nil
}

func (b buckets) deleteTimeline(uid string) error {
	if b.timelines.Bucket([]byte(uid)) == nil {
		return nil
	}
	return b.timelines.DeleteBucket([]byte(uid))
}

func seqKey(seq uint64) []byte { return binary.BigEndian.AppendUint64(nil, seq) }
