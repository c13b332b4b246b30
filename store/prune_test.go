package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nodevirt/nodevirt/store"
)

func TestMarkGone_KeepsFirstTime(t *testing.T) {
	ctx := context.Background()
	db, _ := openTest(t, store.Options{})
	mustPut(t, db, store.Record{UID: "a"}, ev(0, "Created"))

	r, err := db.MarkGone(ctx, "a", t0, ev(1, "Gone"))
	if err != nil {
		t.Fatal(err)
	}
	if !r.IsGone() || !r.Gone.Equal(t0) {
		t.Errorf("after MarkGone: Gone = %v, want %v", r.Gone, t0)
	}
	r, err = db.MarkGone(ctx, "a", t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if !r.Gone.Equal(t0) {
		t.Errorf("second MarkGone moved Gone to %v, want %v", r.Gone, t0)
	}
	assertReasons(t, db, "a", "Created", "Gone")

	if _, err := db.MarkGone(ctx, "nope", t0); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("MarkGone of missing record: err = %v, want ErrNotFound", err)
	}
}

func TestPrune(t *testing.T) {
	const retention = time.Hour
	gone := map[string]time.Duration{ // uid → gone this long before now
		"old":      2 * retention,
		"boundary": retention,
		"recent":   retention - time.Second,
		"justnow":  0,
	}
	now := t0.Add(10 * retention)
	ctx := context.Background()
	db, _ := openTest(t, store.Options{Retention: retention})
	mustPut(t, db, store.Record{UID: "live"}, ev(0, "Created"))
	for uid, ago := range gone {
		mustPut(t, db, store.Record{UID: uid}, ev(0, "Created"))
		if _, err := db.MarkGone(ctx, uid, now.Add(-ago)); err != nil {
			t.Fatal(err)
		}
	}

	pruned, err := db.Prune(ctx, now)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"boundary", "old"}, pruned); diff != "" {
		t.Errorf("pruned (-want +got):\n%s", diff)
	}
	for _, uid := range pruned {
		if _, err := db.Timeline(ctx, uid); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Timeline(%q) after prune: err = %v, want ErrNotFound", uid, err)
		}
	}
	rs, err := db.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, r := range rs {
		left = append(left, r.UID)
	}
	if diff := cmp.Diff([]string{"justnow", "live", "recent"}, left); diff != "" {
		t.Errorf("left after prune (-want +got):\n%s", diff)
	}

	// Nothing more to prune until time passes.
	if pruned, err := db.Prune(ctx, now); err != nil || len(pruned) != 0 {
		t.Errorf("second Prune = %v, %v; want nothing", pruned, err)
	}
	if pruned, err := db.Prune(ctx, now.Add(retention)); err != nil || len(pruned) != 2 {
		t.Errorf("Prune an hour later = %v, %v; want recent and justnow", pruned, err)
	}
}

func TestPrune_DefaultRetention(t *testing.T) {
	ctx := context.Background()
	db, _ := openTest(t, store.Options{})
	mustPut(t, db, store.Record{UID: "a"})
	if _, err := db.MarkGone(ctx, "a", t0); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		at   time.Time
		want int
	}{
		{t0.Add(store.DefaultRetention - time.Nanosecond), 0},
		{t0.Add(store.DefaultRetention), 1},
	} {
		pruned, err := db.Prune(ctx, tt.at)
		if err != nil || len(pruned) != tt.want {
			t.Errorf("Prune(gone+%v) = %v, %v; want %d pruned", tt.at.Sub(t0), pruned, err, tt.want)
		}
	}
}
