package agent_test

import (
	"context"
	"testing"
)

// dials counts the QMP dials in the effect log.
func dials(e *syncEnv) int { return countOf(e.log.Calls(), "qmp.Dial") }

func countOf(list []string, s string) int {
	n := 0
	for _, v := range list {
		if v == s {
			n++
		}
	}
	return n
}

// A restarted agent attaches to the QEMU of a live record before any sync,
// and its first sync finds the connection open: one dial, no Attach.
func TestPreattach_FirstSyncFindsTheConnection(t *testing.T) {
	e := newSyncEnv(t)
	e.start()
	attached := countOf(e.timeline(), "Attached")
	e.newAgent()
	e.log.Reset()
	e.a.PreattachForTest(context.Background())
	if n := dials(e); n != 1 {
		t.Fatalf("preattach dialed QMP %d times, want 1; calls %v", n, e.log.Calls())
	}
	e.mustSync()
	if n := dials(e); n != 1 {
		t.Errorf("after the first sync QMP was dialed %d times, want the preattached connection only; calls %v", n, e.log.Calls())
	}
	if n := countOf(e.timeline(), "Attached"); n != attached {
		t.Errorf("timeline %v: the same QEMU was recorded again", e.timeline())
	}
}

// A record whose QEMU is gone is left to the sync: preattach dials nothing.
func TestPreattach_SkipsAGoneQEMU(t *testing.T) {
	e := newSyncEnv(t)
	e.start()
	e.newAgent()
	e.procs.Exit(qemuPID)
	e.log.Reset()
	e.a.PreattachForTest(context.Background())
	if n := dials(e); n != 0 {
		t.Errorf("preattach dialed QMP %d times for a gone QEMU, want 0; calls %v", n, e.log.Calls())
	}
}
