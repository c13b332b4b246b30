package agent

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"

	"github.com/fsnotify/fsnotify"
)

// HostPodWatcher is the host PodWatcher: one fsnotify (inotify) watcher for
// the sockets directories of every pod, reporting the creation (or rename
// into place) of the files named at construction. The watcher and its
// reader goroutine start with the first Watch; Close ends them.
type HostPodWatcher struct {
	names  []string
	events chan string

	mu     sync.Mutex
	w      *fsnotify.Watcher // nil until the first Watch
	byUID  map[string]string // uid → watched directory
	byDir  map[string]string // watched directory → uid
	closed bool
}

// podEventBuffer bounds the UIDs waiting for the agent; beyond it events
// are dropped, and the plan's safety-net poll syncs the VMI anyway.
const podEventBuffer = 1024

// errWatcherClosed is returned by Watch after Close.
var errWatcherClosed = errors.New("pod watcher closed")

// NewHostPodWatcher returns a watcher of the files names.
func NewHostPodWatcher(names ...string) *HostPodWatcher {
	return &HostPodWatcher{
		names:  names,
		events: make(chan string, podEventBuffer),
		byUID:  map[string]string{},
		byDir:  map[string]string{},
	}
}

// Events carries the UID of a pod directory that got one of the files; it
// is closed by Close.
func (w *HostPodWatcher) Events() <-chan string { return w.events }

// Watch reports the files created in dir as events of uid. Watching the
// same dir again is free; another dir replaces the old one.
func (w *HostPodWatcher) Watch(uid, dir string) error {
	dir = filepath.Clean(dir) // as fsnotify names its events
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return errWatcherClosed
	}
	if w.byUID[uid] == dir {
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
	if err := w.w.Add(dir); err != nil {
		return fmt.Errorf("watch %s: %w", dir, err)
	}
	w.forgetLocked(uid)
	w.byUID[uid], w.byDir[dir] = dir, uid
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
	if w.w == nil {
		close(w.events)
		return nil
	}
	return w.w.Close() // the reader closes events
}

// forgetLocked removes uid's watch, if any; w.mu is held.
func (w *HostPodWatcher) forgetLocked(uid string) {
	dir, ok := w.byUID[uid]
	if !ok {
		return
	}
	delete(w.byUID, uid)
	delete(w.byDir, dir)
	_ = w.w.Remove(dir) // fails when the directory is gone: its watch is gone too
}

// read turns fsnotify events into UIDs until the watcher is closed.
func (w *HostPodWatcher) read(fw *fsnotify.Watcher) {
	defer close(w.events)
	for {
		select {
		case ev, ok := <-fw.Events:
			if !ok {
				return // closed
			}
			w.deliver(ev)
		case _, ok := <-fw.Errors:
			if !ok {
				return
			}
			// A queue overflow loses events: the safety-net poll covers it.
		}
	}
}

// deliver reports the uid of the event's directory when a watched file
// was created; a watched directory that was removed is forgotten.
func (w *HostPodWatcher) deliver(ev fsnotify.Event) {
	w.mu.Lock()
	if uid, ok := w.byDir[ev.Name]; ok && ev.Has(fsnotify.Remove) {
		delete(w.byDir, ev.Name)
		delete(w.byUID, uid)
	}
	uid, ok := w.byDir[filepath.Dir(ev.Name)]
	w.mu.Unlock()
	if !ok || !ev.Has(fsnotify.Create) || !slices.Contains(w.names, filepath.Base(ev.Name)) {
		return
	}
	select {
	case w.events <- uid:
	default: // full: the safety-net poll covers it
	}
}
