package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nodevirt/nodevirt/store"
)

func TestTimeline_Bounded(t *testing.T) {
	tests := []struct {
		name    string
		limit   int
		batches []int // events per AppendEvent call
		want    []uint64
	}{
		{"under limit", 5, []int{1, 2}, []uint64{1, 2, 3}},
		{"exactly limit", 5, []int{5}, []uint64{1, 2, 3, 4, 5}},
		{"one over", 5, []int{3, 3}, []uint64{2, 3, 4, 5, 6}},
		{"batch larger than limit", 3, []int{1, 7}, []uint64{6, 7, 8}},
		{"many single appends", 4, []int{1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, []uint64{7, 8, 9, 10}},
		{"limit one", 1, []int{2, 2}, []uint64{4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			db, _ := openTest(t, store.Options{TimelineLimit: tt.limit})
			mustPut(t, db, store.Record{UID: "a"})
			n := 0
			for _, size := range tt.batches {
				var evs []store.Event
				for range size {
					n++
					evs = append(evs, store.Event{Time: t0, Reason: "Step", Message: fmt.Sprint(n)})
				}
				if err := db.AppendEvent(ctx, "a", evs...); err != nil {
					t.Fatal(err)
				}
			}
			evs, err := db.Timeline(ctx, "a")
			if err != nil {
				t.Fatal(err)
			}
			var got []uint64
			for _, e := range evs {
				got = append(got, e.Seq)
				if e.Message != fmt.Sprint(e.Seq) {
					t.Errorf("event %d has message %q: events out of order", e.Seq, e.Message)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("timeline seqs (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTimeline_DefaultLimit(t *testing.T) {
	ctx := context.Background()
	db, _ := openTest(t, store.Options{})
	mustPut(t, db, store.Record{UID: "a"})
	evs := make([]store.Event, store.DefaultTimelineLimit+50)
	for i := range evs {
		evs[i] = ev(i, "Tick")
	}
	if err := db.AppendEvent(ctx, "a", evs...); err != nil {
		t.Fatal(err)
	}
	got, err := db.Timeline(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != store.DefaultTimelineLimit || got[0].Seq != 51 {
		t.Errorf("got %d events starting at %d, want %d starting at 51", len(got), got[0].Seq, store.DefaultTimelineLimit)
	}
}

func TestTimeline_KeepsEventFields(t *testing.T) {
	ctx := context.Background()
	db, _ := openTest(t, store.Options{})
	in := store.Event{Time: t0, Reason: "Stopped", Message: "QEMU exited: signal 9"}
	mustPut(t, db, store.Record{UID: "a"}, in)
	got, err := db.Timeline(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	in.Seq = 1
	if diff := cmp.Diff([]store.Event{in}, got); diff != "" {
		t.Errorf("timeline (-want +got):\n%s", diff)
	}
}

func TestTimeline_NoEvents(t *testing.T) {
	db, _ := openTest(t, store.Options{})
	mustPut(t, db, store.Record{UID: "a"})
	evs, err := db.Timeline(context.Background(), "a")
	if err != nil || len(evs) != 0 {
		t.Errorf("Timeline = %v, %v; want empty, nil", evs, err)
	}
}

func TestAppendEvent_NeedsRecord(t *testing.T) {
	ctx := context.Background()
	db, _ := openTest(t, store.Options{})
	if err := db.AppendEvent(ctx, "nope", ev(0, "X")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("AppendEvent: err = %v, want ErrNotFound", err)
	}
	if _, err := db.Timeline(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Timeline: err = %v, want ErrNotFound", err)
	}
}
