package reconcile

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func TestExpectations(t *testing.T) {
	now := t0
	e := NewExpectations(func() time.Time { return now })
	if !e.Settled("k") {
		t.Fatal("nothing expected: want settled")
	}
	e.Expect("k", 2, []types.UID{"a"})
	e.Created("k")
	e.Deleted("k", "a")
	if e.Settled("k") {
		t.Fatal("one create outstanding: want unsettled")
	}
	e.Created("k")
	if !e.Settled("k") {
		t.Fatal("all seen: want settled")
	}
	e.Expect("k", 1, nil)
	now = now.Add(ExpectationTTL + time.Second)
	if !e.Settled("k") {
		t.Fatal("expired: want settled")
	}
}
