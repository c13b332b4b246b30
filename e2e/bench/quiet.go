package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// Quiet node: a burst measured while the node still tears down the pods
// of the step before it (the kubelet kills containers and calls CNI DEL
// for a while after the API objects are gone) pays for that work too. The
// bare pods' burst and the VMIs' burst each start on a quiet node, so
// the ratio compares like with like.
const (
	// quietBusy is the busy share of all CPUs under which the node counts
	// as quiet (the idle cluster with its agent, controllers and API
	// server uses a few percent).
	quietBusy = 0.15
	// quietWindow is how long one sample lasts; quietSamples in a row
	// must be under quietBusy.
	quietWindow  = 500 * time.Millisecond
	quietSamples = 4
)

// cpuTimes are the busy and total jiffies of all CPUs.
type cpuTimes struct{ busy, total uint64 }

// readCPUTimes reads the "cpu" line of /proc/stat.
func readCPUTimes() (cpuTimes, error) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return cpuTimes{}, err
	}
	defer f.Close()
	return parseCPUTimes(f)
}

// parseCPUTimes parses the aggregate "cpu" line of /proc/stat: idle and
// iowait are idle time, everything else up to steal is busy (guest time
// is already counted in user).
func parseCPUTimes(r io.Reader) (cpuTimes, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 9 || f[0] != "cpu" {
			continue
		}
		var t cpuTimes
		for i, s := range f[1:9] {
			v, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				return cpuTimes{}, fmt.Errorf("/proc/stat cpu field %d: %w", i+1, err)
			}
			t.total += v
			if i != 3 && i != 4 { // idle, iowait
				t.busy += v
			}
		}
		return t, nil
	}
	if err := sc.Err(); err != nil {
		return cpuTimes{}, err
	}
	return cpuTimes{}, fmt.Errorf("/proc/stat: no aggregate cpu line")
}

// busyShare is the busy share of all CPUs between a and b.
func busyShare(a, b cpuTimes) float64 {
	if b.total <= a.total {
		return 0
	}
	return float64(b.busy-a.busy) / float64(b.total-a.total)
}

// settle is how a wait for a quiet node ended.
type settle struct {
	waited time.Duration
	quiet  bool
	// last is the busy share of the last window.
	last float64
	// busy is the busy share of all CPUs over the quiet windows that
	// ended the wait (set only when quiet): the node's background, which
	// goes on while a step runs (netCPU).
	busy float64
}

func (s settle) String() string {
	if s.quiet {
		return fmt.Sprintf("quiet after %v", s.waited.Round(100*time.Millisecond))
	}
	if s.waited == 0 {
		return "not waited for"
	}
	return fmt.Sprintf("not quiet within %v (last window %.0f%% busy)", s.waited.Round(100*time.Millisecond), s.last*100)
}

// waitQuiet returns once the node's CPUs have been under quietBusy for
// quietSamples windows in a row, or after max (0: at once): a node that
// does not get quiet (other work on the machine, as in CI) is measured
// anyway, and the report says so.
func waitQuiet(ctx context.Context, max time.Duration) (settle, error) {
	return waitQuietWith(ctx, max, readCPUTimes)
}

// waitQuietWith is waitQuiet reading the CPUs' times with read.
func waitQuietWith(ctx context.Context, max time.Duration, read func() (cpuTimes, error)) (settle, error) {
	if max <= 0 {
		return settle{}, nil
	}
	start := time.Now()
	prev, err := read()
	if err != nil {
		return settle{}, err
	}
	var st settle
	runStart := prev // where the current run of quiet windows began
	for quiet := 0; quiet < quietSamples; {
		if time.Since(start) >= max {
			st.waited = time.Since(start)
			return st, nil
		}
		select {
		case <-ctx.Done():
			return settle{}, fmt.Errorf("waiting for a quiet node: %w", ctx.Err())
		case <-time.After(quietWindow):
		}
		cur, err := read()
		if err != nil {
			return settle{}, err
		}
		st.last = busyShare(prev, cur)
		if st.last < quietBusy {
			quiet++
		} else {
			quiet, runStart = 0, cur
		}
		prev = cur
	}
	st.waited, st.quiet, st.busy = time.Since(start), true, busyShare(runStart, prev)
	return st, nil
}

// netCPU is a step's CPU time less the node's background over its
// window: busy (a share of all cpus, measured on the quiet node just
// before the step) × cpus × wall. It is pure.
func netCPU(total time.Duration, busy float64, cpus int, wall time.Duration) time.Duration {
	return total - time.Duration(busy*float64(cpus)*float64(wall))
}
