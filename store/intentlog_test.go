package store_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nodevirt/nodevirt/store"
)

// reasons returns the reason (and message, when set) of each event of the
// timeline of uid.
func reasons(t *testing.T, db *store.DB, uid string) []string {
	t.Helper()
	evs, err := db.Timeline(context.Background(), uid)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		s := e.Reason
		if e.Message != "" {
			s += ":" + e.Message
		}
		out = append(out, s)
	}
	return out
}

func paused(t *testing.T, db *store.DB, uid string) bool {
	t.Helper()
	r, err := db.Get(context.Background(), uid)
	if err != nil {
		t.Fatal(err)
	}
	return r.Intent.Paused
}

func TestSetPaused_SeenAtOnceAndFolded(t *testing.T) {
	ctx := context.Background()
	db, path := openTest(t, store.Options{})
	if err := db.Put(ctx, fullRecord("a"), ev(0, "Adopted")); err != nil {
		t.Fatal(err)
	}
	if err := db.SetPaused(ctx, "a", true, ev(1, "PauseRequested")); err != nil {
		t.Fatal(err)
	}
	if !paused(t, db, "a") {
		t.Error("Get after SetPaused: not paused")
	}
	rs, err := db.List(ctx)
	if err != nil || len(rs) != 1 || !rs[0].Intent.Paused {
		t.Errorf("List after SetPaused = %+v, %v; want the record paused", rs, err)
	}
	// Folded into the bbolt file in the background.
	deadline := time.Now().Add(5 * time.Second)
	for !slices.Contains(reasons(t, db, "a"), "PauseRequested") {
		if time.Now().After(deadline) {
			t.Fatalf("the event never reached the timeline: %v", reasons(t, db, "a"))
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	ro := reopen(t, path, store.Options{ReadOnly: true})
	if !paused(t, ro, "a") {
		t.Error("reopened: not paused")
	}
	if err := ro.SetPaused(ctx, "a", false, ev(2, "UnpauseRequested")); !errors.Is(err, store.ErrReadOnly) {
		t.Errorf("SetPaused on a read-only store = %v, want ErrReadOnly", err)
	}
}

func TestSetPaused_AWriteOfTheRecordTakesItIn(t *testing.T) {
	ctx := context.Background()
	db, _ := openTest(t, store.Options{})
	if err := db.Put(ctx, fullRecord("a"), ev(0, "Adopted")); err != nil {
		t.Fatal(err)
	}
	for i, p := range []bool{true, false, true} {
		if err := db.SetPaused(ctx, "a", p, ev(i+1, "Intent:"+strconv.FormatBool(p))); err != nil {
			t.Fatal(err)
		}
	}
	r, err := db.Update(ctx, "a", func(r *store.Record) error {
		if !r.Intent.Paused {
			t.Error("Update's fn sees the record unpaused")
		}
		r.Observed.RunState = "paused"
		return nil
	}, ev(4, "Observed"))
	if err != nil {
		t.Fatal(err)
	}
	if !r.Intent.Paused {
		t.Error("record as written is not paused")
	}
	want := []string{"Adopted", "Intent:true", "Intent:false", "Intent:true", "Observed"}
	if got := reasons(t, db, "a"); !slices.Equal(got, want) {
		t.Errorf("timeline = %v, want %v", got, want)
	}
}

func TestSetPaused_NoLiveRecord(t *testing.T) {
	ctx := context.Background()
	db, _ := openTest(t, store.Options{})
	if err := db.SetPaused(ctx, "nope", true, ev(0, "PauseRequested")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("no record: %v, want ErrNotFound", err)
	}
	if err := db.Put(ctx, fullRecord("a")); err != nil {
		t.Fatal(err)
	}
	if _, err := db.MarkGone(ctx, "a", t0); err != nil {
		t.Fatal(err)
	}
	if err := db.SetPaused(ctx, "a", true, ev(0, "PauseRequested")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("tombstone: %v, want ErrNotFound", err)
	}
}

// A record deleted and created again (same UID) does not inherit the
// intent of the first, neither pending nor replayed from the log.
func TestSetPaused_DeletedRecordForgetsIt(t *testing.T) {
	ctx := context.Background()
	db, path := openTest(t, store.Options{})
	r := fullRecord("a")
	r.Intent.Paused = false
	if err := db.Put(ctx, r); err != nil {
		t.Fatal(err)
	}
	if err := db.SetPaused(ctx, "a", true, ev(1, "PauseRequested")); err != nil {
		t.Fatal(err)
	}
	if err := db.Delete(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := db.Put(ctx, r); err != nil {
		t.Fatal(err)
	}
	if paused(t, db, "a") {
		t.Error("the new record is paused")
	}
	db.Close()
	if paused(t, reopen(t, path, store.Options{}), "a") {
		t.Error("the new record is paused after a reopen")
	}
}

// A lost log file does not make the next entries look older than what
// the records already reflect.
func TestSetPaused_LostLogNumbersOn(t *testing.T) {
	ctx := context.Background()
	db, path := openTest(t, store.Options{})
	if err := db.Put(ctx, fullRecord("a")); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := db.SetPaused(ctx, "a", i%2 == 0, ev(i, "Intent")); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	if err := os.Remove(path + ".intents"); err != nil {
		t.Fatal(err)
	}
	db = reopen(t, path, store.Options{})
	if !paused(t, db, "a") {
		t.Fatal("the last intent (paused) was not folded at Close")
	}
	if err := db.SetPaused(ctx, "a", false, ev(6, "Intent")); err != nil {
		t.Fatal(err)
	}
	simulateCrash(t, db, path)
	if paused(t, reopen(t, path, store.Options{}), "a") {
		t.Error("the unpause written after the log was lost did not survive a crash")
	}
}

// simulateCrash copies the store's files as they are on disk now (the
// pending intents unfolded) over a fresh directory and points path at the
// copy: what a SIGKILL leaves, without a child process.
func simulateCrash(t *testing.T, db *store.DB, path string) {
	t.Helper()
	copies := map[string][]byte{}
	for _, p := range []string{path, path + ".intents"} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		copies[p] = b
	}
	db.Close() // folds; the copies are what a crash would have left
	for p, b := range copies {
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// The log is a ring: many more intents than slots keep every event and
// the last intent of each record.
func TestSetPaused_RingWraps(t *testing.T) {
	if testing.Short() {
		t.Skip("syncs 2,500 intents; skipped with -short")
	}
	ctx := context.Background()
	opts := store.Options{TimelineLimit: 10_000}
	db, path := openTest(t, opts)
	for _, uid := range []string{"a", "b"} {
		if err := db.Put(ctx, fullRecord(uid)); err != nil {
			t.Fatal(err)
		}
	}
	const n = 2500
	for i := range n {
		uid := []string{"a", "b"}[i%2]
		if err := db.SetPaused(ctx, uid, i%3 == 0, ev(i, "Intent:"+strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	simulateCrash(t, db, path)
	db = reopen(t, path, opts)
	for k, uid := range []string{"a", "b"} {
		last := n - 2 + k
		if got, want := paused(t, db, uid), last%3 == 0; got != want {
			t.Errorf("%s paused = %v, want %v", uid, got, want)
		}
		got := reasons(t, db, uid)
		if len(got) != n/2 {
			t.Errorf("%s has %d events, want %d", uid, len(got), n/2)
			continue
		}
		for j, r := range got {
			if want := "Intent:" + strconv.Itoa(2*j+k); r != want {
				t.Errorf("%s event %d = %s, want %s", uid, j, r, want)
				break
			}
		}
	}
}

// intentChildEnv, when set to a file path, turns the test binary into the
// writer that TestCrash_KilledIntentWriterLosesNothing kills.
const intentChildEnv = "NODEVIRT_STORE_INTENT_CHILD"

const intentTimelineLimit = 1 << 20

// intentWriter pauses and unpauses the record "vm" (iteration i: paused
// when i is even, event "Intent" with message i), every seventh iteration
// also updating the record, and prints i once SetPaused returned. After a
// restart it goes on after the last iteration in the timeline.
func intentWriter(ctx context.Context, path string) error {
	db, err := store.Open(path, store.Options{TimelineLimit: intentTimelineLimit})
	if err != nil {
		return err
	}
	defer db.Close()
	last, err := lastIntent(ctx, db)
	if errors.Is(err, store.ErrNotFound) {
		last, err = -1, db.Put(ctx, store.Record{UID: "vm", Namespace: "crash", Name: "vm"})
	}
	if err != nil {
		return err
	}
	for i := last + 1; ; i++ {
		now := t0.Add(time.Duration(i) * time.Second)
		if err := db.SetPaused(ctx, "vm", i%2 == 0, store.Event{Time: now, Reason: "Intent", Message: strconv.Itoa(i)}); err != nil {
			return err
		}
		if i%7 == 3 {
			_, err := db.Update(ctx, "vm", func(r *store.Record) error {
				r.Observed.Reason = strconv.Itoa(i)
				return nil
			}, store.Event{Time: now, Reason: "Observed", Message: strconv.Itoa(i)})
			if err != nil {
				return err
			}
		}
		fmt.Println(i)
	}
}

// lastIntent returns the message of the last "Intent" event of "vm", -1
// if none.
func lastIntent(ctx context.Context, db *store.DB) (int, error) {
	evs, err := db.Timeline(ctx, "vm")
	if err != nil {
		return 0, err
	}
	if _, err := db.Get(ctx, "vm"); err != nil {
		return 0, err
	}
	for _, e := range slices.Backward(evs) {
		if e.Reason == "Intent" {
			return strconv.Atoi(e.Message)
		}
	}
	return -1, nil
}

func TestCrash_KilledIntentWriterLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a writer process several times; skipped with -short")
	}
	killRounds(t, intentChildEnv, verifyIntentFile)
}

// verifyIntentFile checks the file a killed intentWriter left: before and
// after the replay, the record holds the last acknowledged intent (or the
// one in flight), and every intent has its event. It returns the last
// intent in the timeline.
func verifyIntentFile(t *testing.T, path string, reported int) int {
	t.Helper()
	ctx := context.Background()

	// As the crash left it: the record shows the last intent even where
	// it was not folded yet (a read-only open does not replay).
	ro := openKilled(t, path)
	p := paused(t, ro, "vm")
	ro.Close()

	// Replayed by a writable open: every acknowledged intent has its
	// event, in order, and the record holds the last one.
	db := reopen(t, path, store.Options{TimelineLimit: intentTimelineLimit})
	defer db.Close()
	last, err := lastIntent(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if last < reported || last > reported+1 {
		t.Fatalf("last intent in the timeline %d; reported %d, so want %d or %d", last, reported, reported, reported+1)
	}
	if got, want := paused(t, db, "vm"), last%2 == 0; got != want || p != want {
		t.Fatalf("paused = %v (read-only before the replay: %v), want %v: the intent of iteration %d", got, p, want, last)
	}
	next := 0
	for _, r := range reasons(t, db, "vm") {
		if rest, ok := strings.CutPrefix(r, "Intent:"); ok {
			if rest != strconv.Itoa(next) {
				t.Fatalf("intent event %s where %d was due; timeline %v", rest, next, reasons(t, db, "vm"))
			}
			next++
		}
	}
	if next != last+1 {
		t.Fatalf("%d intent events, want %d", next, last+1)
	}
	return last
}
