package main

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestParseCPUTimes(t *testing.T) {
	const stat = "cpu  100 5 50 800 20 3 2 1 0 0\ncpu0 50 2 25 400 10 1 1 0 0 0\nintr 1\n"
	got, err := parseCPUTimes(strings.NewReader(stat))
	if err != nil {
		t.Fatal(err)
	}
	// busy: user+nice+system+irq+softirq+steal; idle and iowait are not.
	if want := (cpuTimes{busy: 161, total: 981}); got != want {
		t.Errorf("parseCPUTimes = %+v, want %+v", got, want)
	}
	if _, err := parseCPUTimes(strings.NewReader("intr 1\n")); err == nil {
		t.Error("no cpu line: want an error")
	}
	if _, err := parseCPUTimes(strings.NewReader("cpu 1 2 x 4 5 6 7 8\n")); err == nil {
		t.Error("a field that is no number: want an error")
	}
}

func TestBusyShare(t *testing.T) {
	a, b := cpuTimes{busy: 100, total: 1000}, cpuTimes{busy: 150, total: 1200}
	if got := busyShare(a, b); got != 0.25 {
		t.Errorf("busyShare = %v, want 0.25", got)
	}
	if got := busyShare(b, b); got != 0 {
		t.Errorf("no time passed: busyShare = %v, want 0", got)
	}
}

func TestWaitQuiet_NoWait(t *testing.T) {
	st, err := waitQuiet(context.Background(), 0)
	if err != nil || st.quiet || st.waited != 0 {
		t.Fatalf("waitQuiet(0) = %+v, %v; want at once, not quiet", st, err)
	}
	if got := st.String(); got != "not waited for" {
		t.Errorf("String() = %q", got)
	}
}

func TestWaitQuiet_Bounded(t *testing.T) {
	// Whatever the machine is doing, the wait ends by its bound (plus a
	// window) and says whether the node got quiet.
	const max = 3 * quietWindow
	st, err := waitQuiet(context.Background(), max)
	if err != nil {
		t.Fatal(err)
	}
	if st.waited > max+2*quietWindow {
		t.Errorf("waited %v, bound %v", st.waited, max)
	}
	if st.quiet {
		t.Errorf("quiet after %v: %d windows of %v cannot fit in %v", st.waited, quietSamples, quietWindow, max)
	}
	if !strings.HasPrefix(st.String(), "not quiet within") {
		t.Errorf("String() = %q", st.String())
	}
}

func TestWaitQuiet_Canceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := waitQuiet(ctx, time.Minute); err == nil {
		t.Error("canceled context: want an error")
	}
}

func TestWaitQuietWith_BackgroundIsTheQuietWindows(t *testing.T) {
	// One busy window (50 %), then quiet ones at 10 %: the wait ends
	// quiet, and its background is the quiet run's share only.
	const total = 1000 // jiffies per window, all CPUs
	shares := []uint64{500, 100, 100, 100, 100}
	var now cpuTimes
	i := -1
	read := func() (cpuTimes, error) {
		if i >= 0 && i < len(shares) {
			now.busy += shares[i]
			now.total += total
		}
		i++
		return now, nil
	}
	st, err := waitQuietWith(context.Background(), time.Minute, read)
	if err != nil {
		t.Fatal(err)
	}
	if !st.quiet {
		t.Fatalf("not quiet: %+v", st)
	}
	if st.busy != 0.10 {
		t.Errorf("background busy share = %v, want 0.10 (the busy window left out)", st.busy)
	}
}

func TestWaitQuiet_NotQuietHasNoBackground(t *testing.T) {
	read := func() (cpuTimes, error) { return cpuTimes{}, nil } // no time passes: 0 % busy
	st, err := waitQuietWith(context.Background(), 0, read)
	if err != nil || st.quiet || st.busy != 0 {
		t.Errorf("not waited for: %+v, %v; want no background", st, err)
	}
}

func TestNetCPU(t *testing.T) {
	// 10 s of CPU over a 5 s window on 2 CPUs 10 % busy before: 1 s of it
	// was background.
	if got := netCPU(10*time.Second, 0.10, 2, 5*time.Second); got != 9*time.Second {
		t.Errorf("netCPU = %v, want 9s", got)
	}
	if got := netCPU(10*time.Second, 0, 2, 5*time.Second); got != 10*time.Second {
		t.Errorf("no background: netCPU = %v, want 10s", got)
	}
}
