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

// TestHostPodWatcher_NotYetThere waits for directories the kubelet has not
// made yet, as a pod's sockets directory before its volumes are set up:
// each is reported once it exists, only to its own uid, and its files
// are reported from then on.
func TestHostPodWatcher_NotYetThere(t *testing.T) {
	w := NewHostPodWatcher("launcher.sock")
	t.Cleanup(func() { _ = w.Close() })
	root := t.TempDir()
	sockets := func(pod string) string {
		return filepath.Join(root, "pods", pod, "volumes", "kubernetes.io~empty-dir", "sockets")
	}
	for _, pod := range []string{"p1", "p2", "p3"} {
		if err := w.Watch(pod, sockets(pod)); err != nil {
			t.Fatalf("Watch(%s) of a directory not there yet: %v", pod, err)
		}
	}
	if err := w.Watch("p1", sockets("p1")); err != nil { // again: a no-op
		t.Fatal(err)
	}

	// The whole path at once, as the kubelet makes it; and a sibling of
	// no interest on the way.
	if err := os.MkdirAll(filepath.Join(root, "pods", "p2", "volumes", "kubernetes.io~secret"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(sockets("p2"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got := nextEvent(t, w); got != "p2" {
		t.Errorf("event for %q when p2's directory appeared, want p2", got)
	}
	touch(t, filepath.Join(sockets("p2"), "launcher.sock"))
	if got := nextEvent(t, w); got != "p2" {
		t.Errorf("event for %q for p2's launcher socket, want p2", got)
	}

	// One level at a time, with a pause between, and the file already
	// there when the last level is renamed into place.
	for _, d := range []string{"pods/p1", "pods/p1/volumes", "pods/p1/volumes/kubernetes.io~empty-dir"} {
		if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	tmp := filepath.Join(root, "pods", "p1", "volumes", "kubernetes.io~empty-dir", "sockets.tmp")
	if err := os.Mkdir(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	touch(t, filepath.Join(tmp, "launcher.sock"))
	if err := os.Rename(tmp, sockets("p1")); err != nil {
		t.Fatal(err)
	}
	if got := nextEvent(t, w); got != "p1" {
		t.Errorf("event for %q when p1's directory appeared, want p1", got)
	}

	// A pod removed while its uid waits below it: forgotten, and a new
	// Watch takes over.
	if err := os.MkdirAll(filepath.Join(root, "pods", "p3", "volumes"), 0o755); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // the watch moves down to volumes/
	if err := os.RemoveAll(filepath.Join(root, "pods", "p3")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	if err := w.Watch("p3", sockets("p3")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(sockets("p3"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got := nextEvent(t, w); got != "p3" {
		t.Errorf("event for %q when p3's directory appeared, want p3", got)
	}
	select {
	case uid := <-w.Events():
		t.Errorf("unexpected event for %q", uid)
	case <-time.After(50 * time.Millisecond):
	}

	if err := w.Watch("x", "relative/sockets"); err == nil {
		t.Error("Watch of a relative path succeeded")
	}
}

// TestHostPodWatcher_NothingLost: news for a full Events channel waits for
// the agent instead of being dropped, and after a kernel queue overflow
// every uid is re-armed and reported, one waiting on an ancestor whose
// directory came without an event included.
func TestHostPodWatcher_NothingLost(t *testing.T) {
	w := newHostPodWatcher(1, "launcher.sock")
	t.Cleanup(func() { _ = w.Close() })
	dirs := map[string]string{"a": t.TempDir(), "b": t.TempDir(), "c": t.TempDir()}
	for uid, dir := range dirs {
		if err := w.Watch(uid, dir); err != nil {
			t.Fatal(err)
		}
	}
	for _, dir := range dirs {
		touch(t, filepath.Join(dir, "launcher.sock"))
	}
	time.Sleep(50 * time.Millisecond) // all three read from the kernel, one buffered
	got := map[string]bool{}
	for range dirs {
		got[nextEvent(t, w)] = true
	}
	if len(got) != len(dirs) {
		t.Errorf("events for %v, want a, b and c", got)
	}

	// An overflow: d's directory is made while its ancestor is not
	// watched, as if the event had been dropped by the kernel.
	root := t.TempDir()
	sockets := filepath.Join(root, "pod", "sockets")
	if err := w.Watch("d", sockets); err != nil {
		t.Fatal(err)
	}
	w.mu.Lock()
	if err := w.w.Remove(root); err != nil {
		w.mu.Unlock()
		t.Fatal(err)
	}
	w.mu.Unlock()
	if err := os.MkdirAll(sockets, 0o755); err != nil {
		t.Fatal(err)
	}
	lost := w.lost()
	if len(lost) != 4 {
		t.Errorf("after an overflow: %v, want every watched uid", lost)
	}
	w.mu.Lock()
	at := w.at["d"]
	w.mu.Unlock()
	if at != sockets {
		t.Errorf("after an overflow d is watched at %s, want %s", at, sockets)
	}
	touch(t, filepath.Join(sockets, "launcher.sock"))
	if got := nextEvent(t, w); got != "d" {
		t.Errorf("event for %q after re-arming, want d", got)
	}
}
