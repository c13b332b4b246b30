package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func sampleReport() *Report {
	r := &Report{
		Date:     time.Date(2026, 11, 22, 1, 2, 3, 0, time.UTC),
		Commit:   "abc",
		Dirty:    true,
		Machine:  Machine{CPU: "cpu", CPUs: 2, MemoryMiB: 1024, Accel: "TCG"},
		Settings: Settings{Scenarios: []string{"burst", "single"}, Burst: 3, OverheadAt: []int{1}},
		Duration: "1m0s",
	}
	f := summarize("burst", "creation → Running", "s", []float64{1, 2, 3})
	f.KubeVirt = "P50 15–25 s"
	r.add(f, summarize("single", "a|b", "ms", []float64{0.5}))
	r.note("burst", "three VMIs")
	return r
}

func TestWriteMarkdown(t *testing.T) {
	var b bytes.Buffer
	if err := sampleReport().WriteMarkdown(&b); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, want := range []string{
		"| commit | abc (with uncommitted changes) |",
		"| creation → Running | s | 3 | 1.00 | 2.00 | 3.00 | 3.00 | 3.00 |  | P50 15–25 s |",
		`| a\|b | ms | 1 | 0.5 |`,
		"* three VMIs",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	// Sections follow the run order, not the order figures were added.
	if single, burst := strings.Index(md, "## Single VMI"), strings.Index(md, "## Burst"); single < 0 || burst < 0 || single > burst {
		t.Errorf("sections out of order (single at %d, burst at %d)", single, burst)
	}
}

func TestWriteJSONRoundTrip(t *testing.T) {
	r := sampleReport()
	var b bytes.Buffer
	if err := r.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var got Report
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(*r, got, cmpopts.IgnoreUnexported(Figure{})); diff != "" {
		t.Errorf("JSON round trip (-want +got):\n%s", diff)
	}
}

func TestSettingsValidate(t *testing.T) {
	ok := Settings{Scenarios: []string{"burst"}, SingleRuns: 1, PauseCycles: 1, VirtctlCycles: 1, Burst: 1, OverheadAt: []int{1}, ControllerVMIs: 1, Repeat: 1, BurstRounds: 1, SnapshotCycles: 1}
	if err := ok.Validate(); err != nil {
		t.Errorf("valid settings: %v", err)
	}
	bad := ok
	bad.Scenarios = []string{"nope"}
	bad.Burst = 0
	bad.OverheadAt = []int{0}
	bad.Repeat = 0
	bad.BurstSmall = -1
	bad.BurstRounds = 0
	bad.QuietWait = -time.Second
	err := bad.Validate()
	for _, want := range []string{`-only: unknown scenario "nope"`, "-burst 0", "-overhead-at 0", "-repeat 0", "-burst-small -1", "-burst-rounds 0", "-quiet-wait -1s"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to name %q", err, want)
		}
	}
}

// A repeated scenario's figure holds every run's samples and each run's
// median: the run-to-run spread.
func TestReportAdd_MergesRuns(t *testing.T) {
	r := &Report{}
	f := summarize("single", "creation → Running", "s", []float64{1, 2, 3})
	f.KubeVirt = "x"
	r.add(f)
	r.add(summarize("single", "creation → Running", "s", []float64{4, 5, 6}))
	r.add(summarize("single", "creation → Running", "s", []float64{7}))
	r.add(summarize("single", "other", "s", []float64{9}))
	if len(r.Figures) != 2 {
		t.Fatalf("%d figures, want 2", len(r.Figures))
	}
	got := r.Figures[0]
	if got.N != 7 || got.Min != 1 || got.Max != 7 || got.Median != 4 || got.KubeVirt != "x" {
		t.Errorf("merged figure = %+v", got)
	}
	if diff := cmp.Diff([]float64{2, 5, 7}, got.RunMedians); diff != "" {
		t.Errorf("run medians (-want +got):\n%s", diff)
	}
	if got := runMedians(got); got != "2.00 / 5.00 / 7.00" {
		t.Errorf("runMedians() = %q", got)
	}
}

// A run that took no sample of a figure adds no run median of 0.
func TestReportAdd_SkipsEmptyRuns(t *testing.T) {
	r := &Report{}
	r.add(summarize("restart", "floor", "s", nil))
	r.add(summarize("restart", "floor", "s", []float64{1}))
	r.add(summarize("restart", "floor", "s", nil))
	r.add(summarize("restart", "floor", "s", []float64{3}))
	got := r.Figures[0]
	if got.N != 2 || got.Min != 1 || got.Max != 3 {
		t.Errorf("merged figure = %+v", got)
	}
	if diff := cmp.Diff([]float64{1, 3}, got.RunMedians); diff != "" {
		t.Errorf("run medians (-want +got):\n%s", diff)
	}
}
