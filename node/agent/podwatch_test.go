package agent

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// nextEvent returns the next UID from w, failing after a deadline.
func nextEvent(t *testing.T, w *HostPodWatcher) string {
	t.Helper()
	select {
	case uid, ok := <-w.Events():
		if !ok {
			t.Fatal("events closed")
		}
		return uid
	case <-time.After(5 * time.Second):
		t.Fatal("no event after 5s")
	}
	return ""
}

func touch(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestHostPodWatcher(t *testing.T) {
	w := NewHostPodWatcher("launcher.sock", "qemu-running.json")
	t.Cleanup(func() { _ = w.Close() })
	a, b := t.TempDir(), t.TempDir()
	for uid, dir := range map[string]string{"a": a, "b": b} {
		if err := w.Watch(uid, dir); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Watch("a", a); err != nil { // again: a no-op
		t.Fatal(err)
	}

	// A file of no interest, then a watched one: only the second is
	// reported (events of one instance arrive in order).
	touch(t, filepath.Join(a, "qmp.sock"))
	touch(t, filepath.Join(a, "launcher.sock"))
	if got := nextEvent(t, w); got != "a" {
		t.Errorf("event for %q, want a", got)
	}
	// Written whole through a rename, as the launcher does.
	touch(t, filepath.Join(b, "qemu-running.json.tmp"))
	if err := os.Rename(filepath.Join(b, "qemu-running.json.tmp"), filepath.Join(b, "qemu-running.json")); err != nil {
		t.Fatal(err)
	}
	if got := nextEvent(t, w); got != "b" {
		t.Errorf("event for %q, want b", got)
	}

	// Unwatched: a's files are no longer reported.
	w.Unwatch("a")
	touch(t, filepath.Join(a, "qemu-running.json"))
	touch(t, filepath.Join(b, "launcher.sock"))
	if got := nextEvent(t, w); got != "b" {
		t.Errorf("event for %q after Unwatch(a), want b", got)
	}

	// A removed directory's watch is forgotten; a new one can take over.
	if err := os.RemoveAll(b); err != nil {
		t.Fatal(err)
	}
	c := t.TempDir()
	if err := w.Watch("b", c); err != nil {
		t.Fatal(err)
	}
	touch(t, filepath.Join(c, "launcher.sock"))
	if got := nextEvent(t, w); got != "b" {
		t.Errorf("event for %q in the new directory, want b", got)
	}

	if err := w.Watch("x", filepath.Join(a, "missing")); err == nil {
		t.Error("Watch of a missing directory succeeded")
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	for range w.Events() { // drains, then ends: closed
	}
	if err := w.Watch("a", a); err == nil {
		t.Error("Watch after Close succeeded")
	}
}

func TestHostPodWatcher_CloseUnused(t *testing.T) {
	w := NewHostPodWatcher("launcher.sock")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := <-w.Events(); ok {
		t.Error("Events open after Close")
	}
}
