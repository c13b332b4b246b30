package main

import (
	"strings"
	"testing"
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
