package vmi

import "testing"

func TestSuperseded(t *testing.T) {
	s := newSuperseded()
	if s.stale("ns/a", "1") {
		t.Error("a version never recorded is stale")
	}
	s.wrote("ns/a", "5")
	for range 2 {
		if !s.stale("ns/a", "5") {
			t.Error("the replaced version is not stale until the cache moves on")
		}
	}
	if s.stale("ns/b", "5") {
		t.Error("another VMI's version is stale")
	}
	if s.stale("ns/a", "6") || s.stale("ns/a", "5") {
		t.Error("the entry outlived a newer version in the cache")
	}
	s.wrote("ns/a", "7")
	s.wrote("ns/a", "8")
	if !s.stale("ns/a", "7") || !s.stale("ns/a", "8") || s.stale("ns/a", "9") || s.stale("ns/a", "8") {
		t.Error("both versions one sync wrote over are stale until a newer one shows")
	}
	s.wrote("ns/a", "7")
	s.forget("ns/a")
	if s.stale("ns/a", "7") {
		t.Error("a forgotten VMI's version is stale")
	}
}
