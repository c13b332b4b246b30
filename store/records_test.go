package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nodevirt/nodevirt/store"
)

func TestPutGet_RoundTripsEveryField(t *testing.T) {
	ctx := context.Background()
	db, _ := openTest(t, store.Options{})
	in := fullRecord("a")
	mustPut(t, db, in)

	got, err := db.Get(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	want := in
	want.Version = 1
	if diff := cmp.Diff(want, got, cmpOpts); diff != "" {
		t.Errorf("Get (-want +got):\n%s", diff)
	}
}

func TestPut_CompactsSpec(t *testing.T) {
	db, _ := openTest(t, store.Options{})
	r := store.Record{UID: "a", Spec: json.RawMessage("{\n  \"memory\": \"128Mi\"\n}")}
	mustPut(t, db, r)
	got, err := db.Get(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"memory":"128Mi"}`; string(got.Spec) != want {
		t.Errorf("Spec = %s, want %s", got.Spec, want)
	}
}

func TestPut_Invalid(t *testing.T) {
	db, _ := openTest(t, store.Options{})
	tests := []struct {
		name string
		rec  store.Record
		want error
	}{
		{"empty UID", store.Record{Name: "x"}, store.ErrInvalid},
		{"spec not JSON", store.Record{UID: "a", Spec: json.RawMessage("{")}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := db.Put(context.Background(), tt.rec)
			if err == nil {
				t.Fatal("Put succeeded, want error")
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("err = %v, want %v", err, tt.want)
			}
		})
	}
	if rs, err := db.List(context.Background()); err != nil || len(rs) != 0 {
		t.Errorf("List after failed Puts = %v, %v; want empty", rs, err)
	}
}

func TestGet_NotFound(t *testing.T) {
	db, _ := openTest(t, store.Options{})
	if _, err := db.Get(context.Background(), "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("err = %v, want ErrNotFound", err)
	}
}

func TestList_OrderedByUID(t *testing.T) {
	ctx := context.Background()
	db, _ := openTest(t, store.Options{})
	if rs, err := db.List(ctx); err != nil || len(rs) != 0 {
		t.Fatalf("List on empty store = %v, %v", rs, err)
	}
	for _, uid := range []string{"c", "a", "b"} {
		mustPut(t, db, store.Record{UID: uid})
	}
	rs, err := db.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rs {
		got = append(got, r.UID)
	}
	if diff := cmp.Diff([]string{"a", "b", "c"}, got); diff != "" {
		t.Errorf("List UIDs (-want +got):\n%s", diff)
	}
}

func TestUpdate_WritesChangeAndEvents(t *testing.T) {
	ctx := context.Background()
	db, _ := openTest(t, store.Options{})
	mustPut(t, db, store.Record{UID: "a"}, ev(0, "Created"))

	got, err := db.Update(ctx, "a", func(r *store.Record) error {
		r.Intent.Paused = true
		return nil
	}, ev(1, "PauseRequested"))
	if err != nil {
		t.Fatal(err)
	}
	want := store.Record{Version: 1, UID: "a", Intent: store.Intent{Paused: true}}
	if diff := cmp.Diff(want, got, cmpOpts); diff != "" {
		t.Errorf("Update result (-want +got):\n%s", diff)
	}
	stored, err := db.Get(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, stored, cmpOpts); diff != "" {
		t.Errorf("stored record (-want +got):\n%s", diff)
	}
	assertReasons(t, db, "a", "Created", "PauseRequested")
}

func TestUpdate_ErrorWritesNothing(t *testing.T) {
	ctx := context.Background()
	db, _ := openTest(t, store.Options{})
	before := fullRecord("a")
	mustPut(t, db, before, ev(0, "Created"))
	errBoom := errors.New("boom")

	_, err := db.Update(ctx, "a", func(r *store.Record) error {
		r.Intent.Paused = false
		r.Interfaces = nil
		return errBoom
	}, ev(1, "Lost"))
	if !errors.Is(err, errBoom) {
		t.Fatalf("err = %v, want the func's error", err)
	}
	got, err := db.Get(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	before.Version = 1
	if diff := cmp.Diff(before, got, cmpOpts); diff != "" {
		t.Errorf("record changed by failed Update (-want +got):\n%s", diff)
	}
	assertReasons(t, db, "a", "Created")
}

func TestUpdate_Errors(t *testing.T) {
	db, _ := openTest(t, store.Options{})
	mustPut(t, db, store.Record{UID: "a"})
	tests := []struct {
		name string
		uid  string
		fn   func(*store.Record) error
		want error
	}{
		{"missing record", "nope", func(*store.Record) error { return nil }, store.ErrNotFound},
		{"changes UID", "a", func(r *store.Record) error { r.UID = "b"; return nil }, store.ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := db.Update(context.Background(), tt.uid, tt.fn)
			if !errors.Is(err, tt.want) {
				t.Errorf("err = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestDelete_RemovesRecordAndTimeline(t *testing.T) {
	ctx := context.Background()
	db, _ := openTest(t, store.Options{})
	mustPut(t, db, store.Record{UID: "a"}, ev(0, "Created"), ev(1, "Started"))
	mustPut(t, db, store.Record{UID: "b"}, ev(0, "Created"))

	for i := range 2 { // the second Delete finds nothing, and that is fine
		if err := db.Delete(ctx, "a"); err != nil {
			t.Fatalf("Delete #%d: %v", i+1, err)
		}
	}
	if _, err := db.Get(ctx, "a"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get after Delete: err = %v, want ErrNotFound", err)
	}
	if _, err := db.Timeline(ctx, "a"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Timeline after Delete: err = %v, want ErrNotFound", err)
	}
	// A record created again under the same UID starts a fresh timeline.
	mustPut(t, db, store.Record{UID: "a"}, ev(2, "Recreated"))
	evs, err := db.Timeline(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].Seq != 1 {
		t.Errorf("timeline after re-create = %+v, want one event with Seq 1", evs)
	}
	assertReasons(t, db, "b", "Created")
}

// assertReasons checks the reasons of uid's timeline, oldest first.
func assertReasons(t *testing.T, db *store.DB, uid string, want ...string) {
	t.Helper()
	evs, err := db.Timeline(context.Background(), uid)
	if err != nil {
		t.Fatalf("Timeline(%q): %v", uid, err)
	}
	var got []string
	for _, e := range evs {
		got = append(got, e.Reason)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("timeline reasons of %q (-want +got):\n%s", uid, diff)
	}
}

// Concurrent read-modify-writes of one record must not lose updates.
func TestUpdate_Concurrent(t *testing.T) {
	ctx := context.Background()
	db, _ := openTest(t, store.Options{})
	mustPut(t, db, store.Record{UID: "a"})
	const workers, each = 4, 25
	errs := make(chan error, workers)
	for range workers {
		go func() {
			for range each {
				_, err := db.Update(ctx, "a", func(r *store.Record) error {
					r.Process.PID++
					return nil
				}, ev(0, "Inc"))
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	r, err := db.Get(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if r.Process.PID != workers*each {
		t.Errorf("counter = %d after %d updates", r.Process.PID, workers*each)
	}
	evs, err := db.Timeline(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != workers*each {
		t.Errorf("timeline has %d events, want %d", len(evs), workers*each)
	}
}
