package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nodevirt/nodevirt/e2e/localcluster"
)

// TestBenchSmoke runs every scenario with tiny counts on the local
// cluster: the benchmark must keep working (it fails on an error, never
// on a figure). make bench runs the real sizes.
func TestBenchSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("benchmark smoke run skipped in -short mode")
	}
	localcluster.RequirePrereqs(t)
	s := Settings{
		Scenarios:   allScenarios,
		SingleRuns:  1,
		PauseCycles: 3,
		// The spaced variant runs too, briefly.
		PauseSpacedCycles: 2,
		PauseGap:          10 * time.Millisecond,
		VirtctlCycles:     3,
		Burst:             3,
		BurstSmall:        2,
		BurstRounds:       2,
		Repeat:            2,
		BurstInterval:     100 * time.Millisecond,
		OverheadAt:        []int{1},
		ControllerVMIs:    20,
		SnapshotCycles:    1,
		// Other packages' tests share the machine: a short wait, then
		// measured anyway (the report says so).
		QuietWait: 5 * time.Second,
		ReapWait:  5 * time.Second,
	}
	// The lock may be held by the other cluster suites for most of an
	// hour (bench waits up to LockWait for it); the run itself, about 6
	// minutes here, gets its own budget from when the lock is held.
	ctx := context.Background()
	dir := t.TempDir()
	log := slog.New(slog.NewTextHandler(testWriter{t}, nil))
	r, err := bench(ctx, log, s, options{out: dir, keep: os.Getenv("NODEVIRT_E2E_KEEP") == "1", budget: 25 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range allScenarios {
		fs := r.figuresOf(sc)
		if len(fs) == 0 {
			t.Errorf("scenario %s: no figures", sc)
		}
		for _, f := range fs {
			if f.N == 0 {
				t.Errorf("scenario %s: figure %q has no samples", sc, f.Name)
			}
		}
	}
	for _, f := range r.figuresOf("single") {
		if len(f.RunMedians) != s.Repeat {
			t.Errorf("single figure %q: %d run medians, want %d", f.Name, len(f.RunMedians), s.Repeat)
		}
	}
	for _, f := range []string{"latest.md", "latest.json"} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Size() == 0 {
			t.Errorf("report %s: %v", f, err)
		}
	}
	md, _ := os.ReadFile(filepath.Join(dir, "latest.md"))
	t.Logf("report:\n%s", md)
}

// testWriter sends log lines to t.Log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}
