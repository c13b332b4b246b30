package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/e2e/localcluster"
)

// allScenarios in run order.
var allScenarios = []string{"overhead", "single", "pause", "virtctl", "burst", "restart", "controller", "snapshot"}

var getOpts = metav1.GetOptions{}

// Settings are the run's parameters (flags).
type Settings struct {
	Scenarios   []string `json:"scenarios"`
	SingleRuns  int      `json:"singleRuns"`
	PauseCycles int      `json:"pauseCycles"`
	// PauseSpacedCycles and PauseGap are the pause scenario's spaced
	// variant: cycles whose calls wait PauseGap after the watch saw the
	// call before take effect (0 cycles: not run).
	PauseSpacedCycles int           `json:"pauseSpacedCycles"`
	PauseGap          time.Duration `json:"pauseGap"`
	VirtctlCycles     int           `json:"virtctlCycles"`
	Burst             int           `json:"burst"`
	// BurstSmall is the smaller burst run before Burst (0: none).
	BurstSmall int `json:"burstSmall"`
	// BurstRounds is how often each burst (bare pods, launcher-shaped
	// pods, VMIs) runs: its figures pool the rounds' samples and list each
	// round's median, the ratios one value per round.
	BurstRounds int `json:"burstRounds"`
	// Repeat is how often the short scenarios (single, pause, virtctl,
	// restart) run, so the report shows its own run-to-run spread.
	Repeat         int           `json:"repeat"`
	BurstInterval  time.Duration `json:"burstInterval"`
	OverheadAt     []int         `json:"overheadAt"`
	ControllerVMIs int           `json:"controllerVMIs"`
	// SnapshotCycles is how many snapshots (and restores) of the snapshot
	// scenario's VM are taken.
	SnapshotCycles int `json:"snapshotCycles"`
	// QuietWait is the longest the bursts and the single runs wait for a
	// quiet node before they start (0: they start at once).
	QuietWait time.Duration `json:"quietWait"`
	// ReapWait is the longest each burst waits, before its quiet node,
	// for the runtime to drop the dead sandboxes of the step before it
	// (reap.go).
	ReapWait time.Duration `json:"reapWait"`
}

func (s Settings) String() string {
	at := make([]string, len(s.OverheadAt))
	for i, n := range s.OverheadAt {
		at[i] = strconv.Itoa(n)
	}
	return fmt.Sprintf("scenarios %s; short scenarios repeated %d×; single runs %d; pause cycles %d (then %d spaced %v); virtctl cycles %d; bursts of %d and %d VMIs (and as many bare pods) %v apart, %d rounds each; overhead at %s/%d VMs; controller %d VMIs; %d snapshots and restores; waits for a quiet node up to %v, for dead sandboxes to be reaped up to %v",
		strings.Join(s.Scenarios, ","), s.Repeat, s.SingleRuns, s.PauseCycles, s.PauseSpacedCycles, s.PauseGap, s.VirtctlCycles, s.BurstSmall, s.Burst, s.BurstInterval, s.BurstRounds, strings.Join(at, "/"), s.Burst, s.ControllerVMIs, s.SnapshotCycles, s.QuietWait, s.ReapWait)
}

// Validate checks the settings, naming the flag of a bad one.
func (s Settings) Validate() error {
	var errs []error
	if len(s.Scenarios) == 0 {
		errs = append(errs, errors.New("-only: no scenario"))
	}
	for _, sc := range s.Scenarios {
		if !slices.Contains(allScenarios, sc) {
			errs = append(errs, fmt.Errorf("-only: unknown scenario %q (have %s)", sc, strings.Join(allScenarios, ",")))
		}
	}
	if s.SingleRuns < 1 {
		errs = append(errs, fmt.Errorf("-single-runs %d: want at least 1", s.SingleRuns))
	}
	if s.PauseCycles < 1 {
		errs = append(errs, fmt.Errorf("-pause-cycles %d: want at least 1", s.PauseCycles))
	}
	if s.PauseSpacedCycles < 0 {
		errs = append(errs, fmt.Errorf("-pause-spaced-cycles %d: must not be negative", s.PauseSpacedCycles))
	}
	if s.PauseGap <= 0 && s.PauseSpacedCycles > 0 {
		errs = append(errs, fmt.Errorf("-pause-gap %v: want more than 0 with spaced cycles", s.PauseGap))
	}
	if s.VirtctlCycles < 1 {
		errs = append(errs, fmt.Errorf("-virtctl-cycles %d: want at least 1", s.VirtctlCycles))
	}
	if s.Burst < 1 {
		errs = append(errs, fmt.Errorf("-burst %d: want at least 1", s.Burst))
	}
	if s.BurstSmall < 0 {
		errs = append(errs, fmt.Errorf("-burst-small %d: must not be negative", s.BurstSmall))
	}
	if s.Repeat < 1 {
		errs = append(errs, fmt.Errorf("-repeat %d: want at least 1", s.Repeat))
	}
	if s.BurstRounds < 1 {
		errs = append(errs, fmt.Errorf("-burst-rounds %d: want at least 1", s.BurstRounds))
	}
	if s.QuietWait < 0 {
		errs = append(errs, fmt.Errorf("-quiet-wait %v: must not be negative", s.QuietWait))
	}
	if s.ReapWait < 0 {
		errs = append(errs, fmt.Errorf("-reap-wait %v: must not be negative", s.ReapWait))
	}
	if s.BurstInterval < 0 {
		errs = append(errs, fmt.Errorf("-burst-interval %v: must not be negative", s.BurstInterval))
	}
	for _, n := range s.OverheadAt {
		if n < 1 {
			errs = append(errs, fmt.Errorf("-overhead-at %d: want at least 1 VM", n))
		}
	}
	if s.ControllerVMIs < 1 {
		errs = append(errs, fmt.Errorf("-controller-vmis %d: want at least 1", s.ControllerVMIs))
	}
	if s.SnapshotCycles < 1 {
		errs = append(errs, fmt.Errorf("-snapshot-cycles %d: want at least 1", s.SnapshotCycles))
	}
	return errors.Join(errs...)
}

func (s Settings) has(sc string) bool { return slices.Contains(s.Scenarios, sc) }

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run() error {
	var s Settings
	only := flag.String("only", strings.Join(allScenarios, ","), "comma-separated scenarios to run: "+strings.Join(allScenarios, ","))
	flag.IntVar(&s.SingleRuns, "single-runs", 5, "VMIs the single scenario boots one after another")
	flag.IntVar(&s.PauseCycles, "pause-cycles", 200, "pause/unpause cycles")
	flag.IntVar(&s.PauseSpacedCycles, "pause-spaced-cycles", 100, "pause/unpause cycles whose calls each wait -pause-gap after the one before took effect (0: none)")
	flag.DurationVar(&s.PauseGap, "pause-gap", 50*time.Millisecond, "the spaced pause cycles' wait after the watch saw a call take effect")
	flag.IntVar(&s.VirtctlCycles, "virtctl-cycles", 100, "pause/unpause cycles through virtctl and the aggregated API")
	flag.IntVar(&s.Burst, "burst", 100, "VMIs of the burst (also the overhead's largest count and the restart's VMs)")
	flag.IntVar(&s.BurstSmall, "burst-small", 50, "VMIs (and bare pods) of the smaller burst run before -burst (0: none)")
	flag.IntVar(&s.BurstRounds, "burst-rounds", 3, "rounds of each burst (bare pods, launcher-shaped pods, VMIs): the report pools them and lists each round's median and ratio")
	flag.IntVar(&s.Repeat, "repeat", 3, "runs of the short scenarios (single, pause, virtctl, restart): the report shows each run's median")
	flag.DurationVar(&s.BurstInterval, "burst-interval", 100*time.Millisecond, "time between the burst's creations")
	overheadAt := flag.String("overhead-at", "1,20", "VM counts to measure overhead at before the burst (then again at the burst's count)")
	flag.IntVar(&s.ControllerVMIs, "controller-vmis", 8000, "VMIs of the controller scale scenario")
	flag.IntVar(&s.SnapshotCycles, "snapshot-cycles", 5, "snapshots (and restores) of the snapshot scenario's VM")
	flag.DurationVar(&s.QuietWait, "quiet-wait", time.Minute, "the longest a burst or a single run waits for a quiet node (0: no wait)")
	flag.DurationVar(&s.ReapWait, "reap-wait", 2*time.Minute, "the longest a burst waits for the kubelet to reap the dead sandboxes of the step before it (0: no wait)")
	out := flag.String("out", "", "directory for the reports (default <repo>/_output/bench)")
	docs := flag.Bool("docs", false, "also write docs/benchmarks.md and docs/benchmarks.json")
	keep := flag.Bool("keep", false, "leave a cluster this run started running")
	flag.Parse()

	for _, sc := range strings.Split(*only, ",") {
		if sc = strings.TrimSpace(sc); sc != "" {
			s.Scenarios = append(s.Scenarios, sc)
		}
	}
	for _, f := range strings.Split(*overheadAt, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return fmt.Errorf("-overhead-at: %q is not a VM count", f)
		}
		s.OverheadAt = append(s.OverheadAt, n)
	}
	if err := s.Validate(); err != nil {
		return err
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	_, err := bench(ctx, log, s, options{out: *out, docs: *docs, keep: *keep})
	return err
}

// options say where the reports go and what happens to a cluster the run
// started.
type options struct {
	out  string // report directory; "" means <repo>/_output/bench
	docs bool   // also write docs/benchmarks.{md,json}
	keep bool   // leave a cluster this run started running
	// budget bounds the run once the cluster lock is held (0: only ctx
	// does); the wait for the lock has its own bound, LockWait, since
	// other suites may hold the cluster for half an hour.
	budget time.Duration
}

// bench takes the cluster lock, sets the cluster up, runs the scenarios
// of s and writes the reports. The error is the first scenario error (the
// report records it too) or a setup or write error.
func bench(ctx context.Context, log *slog.Logger, s Settings, o options) (*Report, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("the benchmark needs root (the local cluster, /proc of every pod)")
	}
	lockCtx, lockCancel := context.WithTimeout(ctx, localcluster.LockWait)
	unlock, err := localcluster.Lock(lockCtx)
	lockCancel()
	if err != nil {
		return nil, err
	}
	defer unlock()
	if o.budget > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.budget)
		defer cancel()
	}

	began := time.Now()
	e, stop, err := setUp(ctx, log, o.keep)
	if err != nil {
		return nil, err
	}
	defer stop()
	r := &Report{Date: began, Settings: s}
	r.Commit, r.Dirty = gitCommit(ctx, e.root)
	r.Machine = describeMachine(ctx, e)

	runErr := runScenarios(ctx, e, r, s)
	if runErr != nil {
		r.Errors = append(r.Errors, runErr.Error())
	}
	r.Duration = time.Since(began).Round(time.Second).String()
	dir := o.out
	if dir == "" {
		dir = filepath.Join(e.root, "_output", "bench")
	}
	// A failed run's figures are partial: its report goes to dir only,
	// the committed docs stay those of the last complete run.
	docs := o.docs && runErr == nil
	if o.docs && !docs {
		log.Warn("the run failed: docs/benchmarks.{md,json} left as they are")
	}
	paths, err := writeReports(r, dir, docs, e.root)
	if err != nil {
		return r, errors.Join(runErr, err)
	}
	for _, p := range paths {
		log.Info("report written", "path", p)
	}
	return r, runErr
}

// runScenarios runs the selected scenarios in order; the first error ends
// the run (the cluster's state is then unknown).
func runScenarios(ctx context.Context, e *env, r *Report, s Settings) error {
	cleanUp := func() error {
		err := e.deleteVMIs(ctx)
		e.vmis.forget()
		return err
	}
	// The overhead runs first: the agent's idle RSS is its baseline, and
	// a Go heap that has worked (pause cycles, deletions) gives memory
	// back to the OS only slowly.
	var agentIdle int64
	if s.has("overhead") {
		time.Sleep(5 * time.Second)
		var err error
		if agentIdle, err = e.agentRSS(ctx); err != nil {
			return fmt.Errorf("overhead: %w", err)
		}
		have := 0
		for _, n := range s.OverheadAt {
			if _, err := createPaused(ctx, e, "overhead", have, n, 0); err != nil {
				return fmt.Errorf("overhead: %w", err)
			}
			have = n
			if err := e.vmis.waitCount(ctx, "phase="+string(v1.Running), n, 20*time.Minute); err != nil {
				return fmt.Errorf("overhead: %w", err)
			}
			if err := measureOverhead(ctx, e, r, n, agentIdle); err != nil {
				return fmt.Errorf("overhead at %d VMs: %w", n, err)
			}
		}
		if err := cleanUp(); err != nil {
			return err
		}
	}
	for range s.Repeat {
		if !s.has("single") && !s.has("pause") && !s.has("virtctl") {
			break
		}
		runs := s.SingleRuns
		if !s.has("single") {
			runs = 1
		}
		name, err := runSingle(ctx, e, r, runs, s.QuietWait)
		if err != nil {
			return fmt.Errorf("single: %w", err)
		}
		if s.has("pause") {
			t := pauseTarget{vmi: name, about: "the running single VMI"}
			for _, run := range s.pauseRuns() {
				if err := runPause(ctx, e, r, t, run); err != nil {
					return fmt.Errorf("pause: %w", err)
				}
			}
		}
		if s.has("virtctl") {
			if err := runVirtctl(ctx, e, r, name, s.VirtctlCycles); err != nil {
				return fmt.Errorf("virtctl: %w", err)
			}
		}
		if err := cleanUp(); err != nil {
			return err
		}
	}
	if s.has("burst") || s.has("restart") || s.has("overhead") {
		burstNotes(r)
		for round := 1; s.BurstSmall > 0 && s.has("burst") && round <= s.BurstRounds; round++ {
			if err := runBurst(ctx, e, r, s.BurstSmall, s.BurstInterval, s.QuietWait, s.ReapWait); err != nil {
				return fmt.Errorf("burst of %d, round %d: %w", s.BurstSmall, round, err)
			}
			if err := cleanUp(); err != nil {
				return err
			}
		}
		// The last round's VMIs stay for the scenarios after it.
		for round := 1; round <= s.BurstRounds; round++ {
			if round > 1 {
				if err := cleanUp(); err != nil {
					return err
				}
			}
			if err := runBurst(ctx, e, r, s.Burst, s.BurstInterval, s.QuietWait, s.ReapWait); err != nil {
				return fmt.Errorf("burst, round %d: %w", round, err)
			}
		}
		if s.has("overhead") {
			if err := measureOverhead(ctx, e, r, s.Burst, agentIdle); err != nil {
				return fmt.Errorf("overhead at %d VMs: %w", s.Burst, err)
			}
		}
		for i := 0; s.has("restart") && i < s.Repeat; i++ {
			if err := runRestart(ctx, e, r, s.Burst, i+1, s.QuietWait); err != nil {
				return fmt.Errorf("restart %d: %w", i+1, err)
			}
		}
		if s.has("pause") {
			if err := runPauseAmong(ctx, e, r, s.Burst, s.pauseRuns(), s.Repeat, s.QuietWait); err != nil {
				return fmt.Errorf("pause with %d VMs on the node: %w", s.Burst, err)
			}
		}
		if err := cleanUp(); err != nil {
			return err
		}
	}
	if s.has("controller") {
		if err := runController(ctx, e, r, s.ControllerVMIs, 32); err != nil {
			return fmt.Errorf("controller: %w", err)
		}
		if err := cleanUp(); err != nil {
			return err
		}
	}
	if s.has("snapshot") {
		if err := runSnapshot(ctx, e, r, s.SnapshotCycles); err != nil {
			return fmt.Errorf("snapshot: %w", err)
		}
	}
	return nil
}

// writeReports writes the markdown and JSON reports into dir, named by
// the run's date, plus latest.{md,json}, and with docs also
// docs/benchmarks.{md,json}.
func writeReports(r *Report, dir string, docs bool, root string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	stamp := r.Date.UTC().Format("20060102-150405")
	bases := []string{filepath.Join(dir, "report-"+stamp), filepath.Join(dir, "latest")}
	if docs {
		bases = append(bases, filepath.Join(root, "docs", "benchmarks"))
	}
	var paths []string
	for _, base := range bases {
		for _, w := range []struct {
			ext   string
			write func(*os.File) error
		}{
			{".md", func(f *os.File) error { return r.WriteMarkdown(f) }},
			{".json", func(f *os.File) error { return r.WriteJSON(f) }},
		} {
			path := base + w.ext
			f, err := os.Create(path)
			if err != nil {
				return paths, err
			}
			err = w.write(f)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return paths, fmt.Errorf("%s: %w", path, err)
			}
			paths = append(paths, path)
		}
	}
	return paths, nil
}
