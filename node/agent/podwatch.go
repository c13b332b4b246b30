package agent

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/fsnotify/fsnotify"
)

// HostPodWatcher is the host PodWatcher: one fsnotify (inotify) watcher for
// the sockets directories of every pod, reporting the creation (or rename
// into place) of the files named at construction. A directory that does
// not exist yet (the kubelet has not set up the pod's volumes) is waited
// for on its deepest existing ancestor, one level down per directory made,
// and reported once it is there; an ancestor's watch is shared by every
// pod waiting below it. The watcher and its reader goroutine start with
// the first Watch; Close ends them.
//
// No news is lost: an event for a full Events channel waits for the
// agent to take it (the kernel queues meanwhile), and when the kernel's
// queue overflowed every watched uid is re-armed and reported, so the
// agent's poll of a pod whose launcher socket is awaited is only a long
// safety net (pollAwaitSocket).
type HostPodWatcher struct {
	names  []string
	events chan string
	done   chan struct{} // closed by Close: a reader waiting to send gives up

	mu sync.Mutex
	w  *fsnotify.Watcher // nil until the first Watch
	// want is the directory asked for per uid; at is the directory
	// watched for it: want itself, or its deepest existing ancestor
	// while it does not exist. byDir inverts at.
	want   map[string]string
	at     map[string]string
	byDir  map[string]map[string]bool
	closed bool
}

// podEventBuffer is how many UIDs may wait for the agent before the
// reader waits too.
const podEventBuffer = 1024

// errWatcherClosed is returned by Watch after Close.
var errWatcherClosed = errors.New("pod watcher closed")

// NewHostPodWatcher returns a watcher of the files names.
func NewHostPodWatcher(names ...string) *HostPodWatcher {
	return newHostPodWatcher(podEventBuffer, names...)
}

func newHostPodWatcher(buffer int, names ...string) *HostPodWatcher {
	return &HostPodWatcher{
		names:  names,
		events: make(chan string, buffer),
		done:   make(chan struct{}),
		want:   map[string]string{},
		at:     map[string]string{},
		byDir:  map[string]map[string]bool{},
	}
}

// Events carries the UID of a pod directory that got one of the files, or
// that came into being while waited for; it is closed by Close.
func (w *HostPodWatcher) Events() <-chan string { return w.events }

// Watch reports the files created in dir as events of uid; a dir that does
// not exist yet is reported when it appears. Watching the same dir again
// is free; another dir replaces the old one.
func (w *HostPodWatcher) Watch(uid, dir string) error {
	if !filepath.IsAbs(dir) {
		return fmt.Errorf("watch %s: not an absolute path", dir)
	}
	dir = filepath.Clean(dir) // as fsnotify names its events
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return errWatcherClosed
	}
	if w.want[uid] == dir {
		return nil
	}
	if w.w == nil {
		fw, err := fsnotify.NewWatcher()
		if err != nil {
			return fmt.Errorf("inotify: %w", err)
		}
		w.w = fw
		go w.read(fw)
	}
	w.forgetLocked(uid)
	w.want[uid] = dir
	if _, err := w.armLocked(uid); err != nil {
		w.forgetLocked(uid)
		return err
	}
	return nil
}

// Unwatch stops the events of uid.
func (w *HostPodWatcher) Unwatch(uid string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.forgetLocked(uid)
	}
}

// Close ends the watcher; Events is closed once its reader is done.
func (w *HostPodWatcher) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	close(w.done)
	if w.w == nil {
		close(w.events)
		return nil
	}
	return w.w.Close() // the reader closes events
}

// armLocked watches want[uid] if it exists, else its deepest existing
// ancestor, and reports whether want[uid] itself is watched; w.mu is held.
func (w *HostPodWatcher) armLocked(uid string) (bool, error) {
	want := w.want[uid]
	for {
		dir := deepestDir(want) // "/" at worst: want is absolute
		if err := w.moveLocked(uid, dir); err != nil {
			return false, err
		}
		// A directory made between the look and the watch sent no event
		// to the watch: look again until nothing changed.
		if dir == want || deepestDir(want) == dir {
			return dir == want, nil
		}
	}
}

// moveLocked makes dir the directory watched for uid, sharing its watch
// with the other uids there and dropping the old one's when unused; w.mu
// is held.
func (w *HostPodWatcher) moveLocked(uid, dir string) error {
	if old, ok := w.at[uid]; ok {
		if old == dir {
			return nil
		}
		w.leaveLocked(uid, old)
	}
	if len(w.byDir[dir]) == 0 {
		if err := w.w.Add(dir); err != nil {
			return fmt.Errorf("watch %s: %w", dir, err)
		}
		w.byDir[dir] = map[string]bool{}
	}
	w.byDir[dir][uid] = true
	w.at[uid] = dir
	return nil
}

// leaveLocked takes uid off dir's watch, removing the watch when no uid is
// left on it; w.mu is held.
func (w *HostPodWatcher) leaveLocked(uid, dir string) {
	delete(w.at, uid)
	uids := w.byDir[dir]
	delete(uids, uid)
	if len(uids) == 0 {
		delete(w.byDir, dir)
		_ = w.w.Remove(dir) // fails when the directory is gone: its watch is gone too
	}
}

// forgetLocked removes uid's watch, if any; w.mu is held.
func (w *HostPodWatcher) forgetLocked(uid string) {
	if dir, ok := w.at[uid]; ok {
		w.leaveLocked(uid, dir)
	}
	delete(w.want, uid)
}

// deepestDir is the absolute dir if it is a directory, else its deepest
// ancestor that is.
func deepestDir(dir string) string {
	for {
		if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			return dir
		}
		dir = up
	}
}

// read turns fsnotify events into UIDs until the watcher is closed.
func (w *HostPodWatcher) read(fw *fsnotify.Watcher) {
	defer close(w.events)
	for {
		var uids []string
		select {
		case ev, ok := <-fw.Events:
			if !ok {
				return // closed
			}
			uids = w.news(ev)
		case err, ok := <-fw.Errors:
			if !ok {
				return
			}
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				uids = w.lost()
			}
		}
		for _, uid := range uids {
			select {
			case w.events <- uid:
			case <-w.done:
				return
			}
		}
	}
}

// lost re-arms every uid's watch and returns them all: the kernel's queue
// overflowed, so a file or a directory on a uid's way may have come
// without an event.
func (w *HostPodWatcher) lost() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]string, 0, len(w.want))
	for uid := range w.want {
		if _, err := w.armLocked(uid); err != nil {
			w.forgetLocked(uid) // the agent's next Watch tries again
		}
		out = append(out, uid)
	}
	return out
}

// news are the uids an event concerns: a watched file was created in a
// uid's directory, or a uid's directory came into being. A watched
// directory that was removed is forgotten with its uids.
func (w *HostPodWatcher) news(ev fsnotify.Event) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ev.Has(fsnotify.Remove) {
		for uid := range w.byDir[ev.Name] {
			w.forgetLocked(uid)
		}
	}
	if !ev.Has(fsnotify.Create) {
		return nil
	}
	var out []string
	for uid := range w.byDir[filepath.Dir(ev.Name)] {
		want := w.want[uid]
		if w.at[uid] == want {
			if slices.Contains(w.names, filepath.Base(ev.Name)) {
				out = append(out, uid)
			}
			continue
		}
		if want != ev.Name && !strings.HasPrefix(want, ev.Name+string(filepath.Separator)) {
			continue // another pod's directory
		}
		// The next directory on the way: go down.
		reached, err := w.armLocked(uid)
		if err != nil {
			w.forgetLocked(uid) // the agent's next Watch tries again
			continue
		}
		if reached {
			out = append(out, uid) // a watched file may be in it already
		}
	}
	return out
}
