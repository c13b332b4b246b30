package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nodevirt/nodevirt/store"
)

// uidsOf returns the UIDs of the records RefsByName finds for ns/name.
func uidsOf(t *testing.T, db *store.DB, ns, name string) []string {
	t.Helper()
	rs, err := db.RefsByName(context.Background(), ns, name)
	if err != nil {
		t.Fatalf("RefsByName(%s/%s): %v", ns, name, err)
	}
	uids := []string{}
	for _, r := range rs {
		uids = append(uids, r.UID)
	}
	return uids
}

func TestRefsByName(t *testing.T) {
	ctx := context.Background()
	db, path := openTest(t, store.Options{})
	for _, r := range []store.Record{
		{UID: "b", Namespace: "ns", Name: "vm"},
		{UID: "a", Namespace: "ns", Name: "vm"},
		{UID: "c", Namespace: "ns", Name: "other"},
		{UID: "d", Namespace: "elsewhere", Name: "vm"},
	} {
		mustPut(t, db, r)
	}
	if _, err := db.MarkGone(ctx, "a", t0); err != nil {
		t.Fatal(err)
	}
	refs, err := db.RefsByName(ctx, "ns", "vm")
	if err != nil {
		t.Fatal(err)
	}
	want := []store.Ref{{UID: "a", Gone: t0}, {UID: "b"}}
	if diff := cmp.Diff(want, refs, cmp.Comparer(time.Time.Equal)); diff != "" {
		t.Errorf("RefsRefsByName(ns/vm) (-want +got):\n%s", diff)
	}
	if err := db.Delete(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a"}, uidsOf(t, db, "ns", "vm")); diff != "" {
		t.Errorf("RefsByName(ns/vm) after Delete (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"c", "d"}, db.LiveUIDs()); diff != "" {
		t.Errorf("LiveUIDs (-want +got):\n%s", diff)
	}
	if got := uidsOf(t, db, "ns", "nope"); len(got) != 0 {
		t.Errorf("RefsByName(ns/nope) = %v, want none", got)
	}

	// A reopened file is indexed from what it holds.
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	ro := reopen(t, path, store.Options{ReadOnly: true})
	for name, want := range map[string][]string{"vm": {"a"}, "other": {"c"}} {
		if diff := cmp.Diff(want, uidsOf(t, ro, "ns", name)); diff != "" {
			t.Errorf("reopened: RefsByName(ns/%s) (-want +got):\n%s", name, diff)
		}
	}
}

// A transaction that fails after its record was written leaves the index
// as the file is.
func TestRefsByName_RolledBack(t *testing.T) {
	ctx := context.Background()
	db, _ := openTest(t, store.Options{})
	mustPut(t, db, store.Record{UID: "a", Namespace: "ns", Name: "vm"})
	// An event time JSON cannot encode fails the transaction after the
	// record was put.
	bad := store.Event{Time: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), Reason: "Bad"}
	_, err := db.Update(ctx, "a", func(r *store.Record) error {
		r.Name = "renamed"
		return nil
	}, bad)
	if err == nil {
		t.Fatal("Update with an unencodable event succeeded")
	}
	if got := uidsOf(t, db, "ns", "renamed"); len(got) != 0 {
		t.Errorf("RefsByName(ns/renamed) after the rollback = %v, want none", got)
	}
	if diff := cmp.Diff([]string{"a"}, uidsOf(t, db, "ns", "vm")); diff != "" {
		t.Errorf("RefsByName(ns/vm) after the rollback (-want +got):\n%s", diff)
	}
}
