package store_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/nodevirt/nodevirt/store"
)

// exampleDir returns a scratch directory; examples remove it when done.
func exampleDir() string {
	dir, err := os.MkdirTemp("", "store-example-")
	if err != nil {
		log.Fatal(err)
	}
	return dir
}

func ExampleOpen() {
	dir := exampleDir()
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "agent.db")

	// The agent opens the file for writing and holds it while it runs.
	agent, err := store.Open(path, store.Options{Retention: 24 * time.Hour})
	if err != nil {
		log.Fatal(err)
	}
	defer agent.Close()

	// nodectl's post-mortem open fails fast while the agent holds the file.
	_, err = store.Open(path, store.Options{ReadOnly: true, LockTimeout: 100 * time.Millisecond})
	fmt.Println(errors.Is(err, store.ErrLocked))
	// Output: true
}

// The agent records intent before acting on it, so that a crash between the
// two leaves the intent on disk for the restarted agent to carry out.
func ExampleDB_Update() {
	dir := exampleDir()
	defer os.RemoveAll(dir)
	db, err := store.Open(filepath.Join(dir, "agent.db"), store.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	uid := "6a1f0c2e-0000-4000-8000-000000000001"
	err = db.Put(ctx, store.Record{UID: uid, Namespace: "default", Name: "testvm"},
		store.Event{Time: now, Reason: "Created"})
	if err != nil {
		log.Fatal(err)
	}

	// 1. Intent, with its timeline event, in one transaction.
	_, err = db.Update(ctx, uid, func(r *store.Record) error {
		r.Intent.Paused = true
		return nil
	}, store.Event{Time: now, Reason: "PauseRequested"})
	if err != nil {
		log.Fatal(err) // nothing was written; do not pause
	}

	// 2. The side effect: here the agent sends QMP "stop".

	// 3. What was observed.
	r, err := db.Update(ctx, uid, func(r *store.Record) error {
		r.Observed.RunState = "paused"
		r.Observed.At = now
		return nil
	}, store.Event{Time: now, Reason: "Paused"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(r.Name, r.Intent.Paused, r.Observed.RunState)
	// Output: testvm true paused
}

func ExampleDB_Timeline() {
	dir := exampleDir()
	defer os.RemoveAll(dir)
	db, err := store.Open(filepath.Join(dir, "agent.db"), store.Options{TimelineLimit: 3})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

	if err := db.Put(ctx, store.Record{UID: "uid-1"}); err != nil {
		log.Fatal(err)
	}
	for i, reason := range []string{"Created", "Started", "Paused", "Unpaused", "Stopped"} {
		ev := store.Event{Time: start.Add(time.Duration(i) * time.Second), Reason: reason}
		if err := db.AppendEvent(ctx, "uid-1", ev); err != nil {
			log.Fatal(err)
		}
	}
	evs, err := db.Timeline(ctx, "uid-1")
	if err != nil {
		log.Fatal(err)
	}
	for _, ev := range evs {
		fmt.Println(ev.Seq, ev.Time.Format(time.TimeOnly), ev.Reason)
	}
	// Output:
	// 3 03:04:07 Paused
	// 4 03:04:08 Unpaused
	// 5 03:04:09 Stopped
}

func ExampleDB_Prune() {
	dir := exampleDir()
	defer os.RemoveAll(dir)
	db, err := store.Open(filepath.Join(dir, "agent.db"), store.Options{Retention: time.Hour})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	gone := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

	if err := db.Put(ctx, store.Record{UID: "uid-1"}); err != nil {
		log.Fatal(err)
	}
	// The VMI is gone; its record stays, as a tombstone, for the retention.
	if _, err := db.MarkGone(ctx, "uid-1", gone, store.Event{Time: gone, Reason: "Gone"}); err != nil {
		log.Fatal(err)
	}
	for _, now := range []time.Time{gone.Add(time.Minute), gone.Add(time.Hour)} {
		pruned, err := db.Prune(ctx, now)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(now.Sub(gone), pruned)
	}
	_, err = db.Get(ctx, "uid-1")
	fmt.Println(errors.Is(err, store.ErrNotFound))
	// Output:
	// 1m0s []
	// 1h0m0s [uid-1]
	// true
}
