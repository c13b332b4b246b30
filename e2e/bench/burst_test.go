package main

import (
	"runtime"
	"testing"
	"time"
)

func TestStepUse_NetPerObject(t *testing.T) {
	u := stepUse{
		cpu:    cpuUse{wall: 5 * time.Second, byComp: map[string]time.Duration{"kubelet": 6 * time.Second, "QEMU": 4 * time.Second}},
		before: settle{quiet: true, busy: 0.10},
	}
	if got := u.perObject(10); got != 1 {
		t.Errorf("perObject = %v, want 1 (10 CPU-s over 10 objects)", got)
	}
	got, ok := u.netPerObject(10)
	want := (10 - 0.10*float64(runtime.NumCPU())*5) / 10
	if !ok || got < want-1e-9 || got > want+1e-9 {
		t.Errorf("netPerObject = %v, %v; want %v, true", got, ok, want)
	}
	u.before.quiet = false
	if _, ok := u.netPerObject(10); ok {
		t.Error("the node never got quiet before the step: want no net figure")
	}
}
