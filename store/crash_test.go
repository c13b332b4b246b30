package store_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nodevirt/nodevirt/store"
)

// crashChildEnv, when set to a file path, turns the test binary into the
// writer that TestCrash_KilledWriterLosesNothing kills (see TestMain).
const crashChildEnv = "NODEVIRT_STORE_CRASH_CHILD"

// crashTimelineLimit is small so that trimming runs on most writes.
const crashTimelineLimit = 20

func TestMain(m *testing.M) {
	for env, writer := range map[string]func(context.Context, string) error{
		crashChildEnv:  crashWriter,
		intentChildEnv: intentWriter,
	} {
		if path := os.Getenv(env); path != "" {
			if err := writer(context.Background(), path); err != nil {
				fmt.Fprintln(os.Stderr, "crash writer:", err)
				os.Exit(1)
			}
			os.Exit(0)
		}
	}
	os.Exit(m.Run())
}

// The writer's loop, iteration i:
//
//	A  Put rec-i (deterministic content of varying size, some spanning
//	   overflow pages) with a "Created" event
//	B  Update "log": Observed.Reason = i, event "Iter" with message i
//	C  when i%10 == 5, Delete rec-(i-5)
//	then print i: everything up to iteration i is committed.
//
// After a restart it resumes after the last iteration whose B committed,
// redoing that iteration's C (Delete is idempotent).

func crashRecord(i int) store.Record {
	pad := strings.Repeat(string(rune('a'+i%26)), (i*7919)%20000)
	return store.Record{
		UID:       fmt.Sprintf("rec-%06d", i),
		Namespace: "crash",
		Name:      strconv.Itoa(i),
		Spec:      json.RawMessage(fmt.Sprintf(`{"i":%d,"pad":%q}`, i, pad)),
		Process:   store.Process{PID: i, StartTime: uint64(i) * 3},
	}
}

func crashWriter(ctx context.Context, path string) error {
	db, err := store.Open(path, store.Options{TimelineLimit: crashTimelineLimit})
	if err != nil {
		return err
	}
	defer db.Close()
	last, err := lastIteration(ctx, db)
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if err := db.Put(ctx, store.Record{UID: "log"}); err != nil {
			return err
		}
		last = -1
	}
	if err := crashDelete(ctx, db, last); err != nil {
		return err
	}
	for i := last + 1; ; i++ {
		now := t0.Add(time.Duration(i) * time.Second)
		if err := db.Put(ctx, crashRecord(i), store.Event{Time: now, Reason: "Created"}); err != nil {
			return err
		}
		_, err := db.Update(ctx, "log", func(r *store.Record) error {
			r.Observed.Reason = strconv.Itoa(i)
			return nil
		}, store.Event{Time: now, Reason: "Iter", Message: strconv.Itoa(i)})
		if err != nil {
			return err
		}
		if err := crashDelete(ctx, db, i); err != nil {
			return err
		}
		fmt.Println(i)
	}
}

func crashDelete(ctx context.Context, db *store.DB, i int) error {
	if i%10 != 5 {
		return nil
	}
	return db.Delete(ctx, crashRecord(i-5).UID)
}

// lastIteration returns the last iteration whose step B committed.
func lastIteration(ctx context.Context, db *store.DB) (int, error) {
	r, err := db.Get(ctx, "log")
	if err != nil {
		return 0, err
	}
	if r.Observed.Reason == "" {
		return -1, nil
	}
	return strconv.Atoi(r.Observed.Reason)
}

func TestCrash_KilledWriterLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a writer process several times; skipped with -short")
	}
	killRounds(t, crashChildEnv, verifyCrashFile)
}

// killRounds runs the writer that child selects on one file 8 times,
// SIGKILLing it at a random point after its first reported commit, and
// after each kill has verify check the file against the highest iteration
// any round reported; verify returns the last iteration it found.
func killRounds(t *testing.T, child string, verify func(t *testing.T, path string, reported int) int) {
	t.Helper()
	const rounds = 8
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, seed>>1))
	t.Logf("seed %d", seed)
	path := filepath.Join(t.TempDir(), "agent.db")

	reported := -1 // highest iteration a child reported committed, over all rounds
	for round := range rounds {
		delay := time.Duration(rng.IntN(150)) * time.Millisecond
		got := runAndKill(t, child, path, delay)
		reported = max(reported, got)
		last := verify(t, path, reported)
		t.Logf("round %d: killed %v after the first commit; reported %d, committed %d", round, delay, got, last)
		if t.Failed() {
			return
		}
	}
	if reported < rounds {
		t.Errorf("only %d iterations in %d rounds: the writer barely ran", reported+1, rounds)
	}
}

// runAndKill runs the writer that the environment variable child selects
// on path, SIGKILLs it delay after its first reported commit and returns
// the highest iteration it reported.
func runAndKill(t *testing.T, child, path string, delay time.Duration) int {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), child+"="+path)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})

	first := make(chan struct{})
	highest := make(chan int, 1)
	go func() {
		best, sc := -1, bufio.NewScanner(stdout)
		for sc.Scan() {
			if n, err := strconv.Atoi(sc.Text()); err == nil {
				if best < 0 {
					close(first)
				}
				best = max(best, n)
			}
		}
		highest <- best
	}()

	select {
	case <-first:
	case <-time.After(20 * time.Second):
		t.Errorf("writer reported no commit within 20s")
	}
	time.Sleep(delay) // the kill point, chosen at random
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	best := <-highest // EOF: the writer is dead
	err = cmd.Wait()
	killed = true
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("writer ended with %v, want killed by SIGKILL; stderr:\n%s", err, stderr.String())
	}
	return best
}

// openKilled opens, read-only, the file a killed writer left, and checks
// that it is intact. The caller closes it (before the next round's writer
// takes its lock).
func openKilled(t *testing.T, path string) *store.DB {
	t.Helper()
	db, err := store.Open(path, store.Options{ReadOnly: true, LockTimeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("reopen after SIGKILL: %v", err)
	}
	if err := db.Check(context.Background()); err != nil {
		db.Close()
		t.Fatalf("file damaged: %v", err)
	}
	return db
}

// verifyCrashFile opens the file read-only and checks that every iteration up
// to reported, and nothing after the last committed one, is in it intact. It
// returns the last committed iteration.
func verifyCrashFile(t *testing.T, path string, reported int) int {
	t.Helper()
	ctx := context.Background()
	db := openKilled(t, path)
	defer db.Close()
	last, err := lastIteration(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if last < reported || last > reported+1 {
		t.Fatalf("log says iteration %d committed; reported %d, so want %d or %d", last, reported, reported, reported+1)
	}

	recs, err := db.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]store.Record{}
	for _, r := range recs {
		seen[r.UID] = r
	}
	for i := 0; i <= last+1; i++ {
		want := crashRecord(i)
		got, ok := seen[want.UID]
		delete(seen, want.UID)
		// C of iteration i+5 deletes record i; it has surely committed once
		// a later iteration has. The iteration after last may have done A.
		deleted := i%10 == 0 && i+5 < last
		maybe := i == last+1 || (i%10 == 0 && i+5 == last)
		switch {
		case ok && deleted:
			t.Errorf("record %d exists; it was deleted", i)
		case ok:
			want.Version = 1
			if diff := cmp.Diff(want, got, cmpOpts); diff != "" {
				t.Errorf("record %d damaged (-want +got):\n%s", i, diff)
			}
		case !deleted && !maybe:
			t.Errorf("record %d of a committed iteration is missing", i)
		}
	}
	delete(seen, "log")
	for uid := range seen {
		t.Errorf("unexpected record %q", uid)
	}

	evs, err := db.Timeline(ctx, "log")
	if err != nil {
		t.Fatal(err)
	}
	if n := min(last+1, crashTimelineLimit); len(evs) != n {
		t.Errorf("log timeline has %d events, want %d", len(evs), n)
	}
	for k, e := range evs {
		if want := strconv.Itoa(last - len(evs) + 1 + k); e.Message != want || e.Seq != evs[0].Seq+uint64(k) {
			t.Errorf("log event %d = seq %d message %q, want message %s in sequence", k, e.Seq, e.Message, want)
		}
	}
	return last
}
