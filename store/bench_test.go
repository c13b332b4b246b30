package store_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/nodevirt/nodevirt/store"
)

const benchRecords = 100

// benchDB returns a store holding benchRecords full records and their UIDs.
func benchDB(b *testing.B) (*store.DB, []string) {
	b.Helper()
	db, _ := openTest(b, store.Options{})
	uids := make([]string, benchRecords)
	for i := range uids {
		uids[i] = fmt.Sprintf("uid-%03d", i)
		if err := db.Put(context.Background(), fullRecord(uids[i])); err != nil {
			b.Fatal(err)
		}
	}
	return db, uids
}

// BenchmarkUpdate measures one state change: a read-modify-write of one
// record plus a timeline event, committed and fsynced.
func BenchmarkUpdate(b *testing.B) {
	ctx := context.Background()
	db, uids := benchDB(b)
	for i := 0; b.Loop(); i++ {
		_, err := db.Update(ctx, uids[i%len(uids)], func(r *store.Record) error {
			r.Observed.RunState = fmt.Sprint(i)
			return nil
		}, ev(i, "Bench"))
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSetPaused measures a pause intent made durable through the
// intent log (one slot write and one fdatasync), against BenchmarkUpdate's
// bbolt commit of a record.
func BenchmarkSetPaused(b *testing.B) {
	ctx := context.Background()
	db, uids := benchDB(b)
	for i := 0; b.Loop(); i++ {
		if err := db.SetPaused(ctx, uids[i%len(uids)], i%2 == 0, ev(i, "PauseRequested")); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkList measures listing (and decoding) all records.
func BenchmarkList(b *testing.B) {
	ctx := context.Background()
	db, _ := benchDB(b)
	for b.Loop() {
		rs, err := db.List(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if len(rs) != benchRecords {
			b.Fatalf("List returned %d records, want %d", len(rs), benchRecords)
		}
	}
}

// BenchmarkRefsByName measures finding one VMI's records by name among
// benchRecords (what the node API does on every request).
func BenchmarkRefsByName(b *testing.B) {
	ctx := context.Background()
	db, uids := benchDB(b)
	for i := 0; b.Loop(); i++ {
		uid := uids[i%len(uids)]
		rs, err := db.RefsByName(ctx, "default", "vm-"+uid)
		if err != nil {
			b.Fatal(err)
		}
		if len(rs) != 1 {
			b.Fatalf("RefsByName found %d records, want 1", len(rs))
		}
	}
}
