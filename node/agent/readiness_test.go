package agent

import (
	"errors"
	"strings"
	"testing"
)

func TestReadiness(t *testing.T) {
	var r readiness
	if err := r.err(); !errors.Is(err, errNotListed) {
		t.Fatalf("before the informers listed: %v, want %v", err, errNotListed)
	}
	r.synced("a") // a sync before start (none happen, but it must not matter)
	r.start([]string{"a", "b", "c"})
	if err := r.err(); err == nil || !strings.Contains(err.Error(), "3 of 3") {
		t.Fatalf("after start: %v, want 3 of 3 pending", err)
	}
	r.synced("a")
	r.synced("a")
	r.synced("x") // a VMI without a record at start
	if err := r.err(); err == nil || !strings.Contains(err.Error(), "2 of 3") {
		t.Fatalf("after a synced: %v, want 2 of 3 pending", err)
	}
	r.synced("b")
	r.synced("c")
	if err := r.err(); err != nil {
		t.Fatalf("every record synced: %v", err)
	}

	var empty readiness
	empty.start(nil)
	if err := empty.err(); err != nil {
		t.Fatalf("no records: %v", err)
	}
}
