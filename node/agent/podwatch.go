package agent

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// HostPodWatcher is the host PodWatcher: one inotify instance for the
// sockets directories of every pod, reporting the creation (or rename into
// place) of the files named at construction. The instance and its reader
// goroutine start with the first Watch; Close ends them.
type HostPodWatcher struct {
	names  []string
	events chan string

	mu     sync.Mutex
	f      *os.File // the inotify instance, nil until the first Watch
	byUID  map[string]podWatch
	byWD   map[int32]string
	closed bool
}

type podWatch struct {
	wd  int32
	dir string
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
		byUID:  map[string]podWatch{},
		byWD:   map[int32]string{},
	}
}

// Events carries the UID of a pod directory that got one of the files; it
// is closed by Close.
func (w *HostPodWatcher) Events() <-chan string { return w.events }

// Watch reports the files created in dir as events of uid. Watching the
// same dir again is free; another dir replaces the old one.
func (w *HostPodWatcher) Watch(uid, dir string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return errWatcherClosed
	}
	if cur, ok := w.byUID[uid]; ok && cur.dir == dir {
		return nil
	}
	if err := w.startLocked(); err != nil {
		return err
	}
	var wd int
	err := w.control(func(fd int) error {
		var err error
		wd, err = unix.InotifyAddWatch(fd, dir, unix.IN_CREATE|unix.IN_MOVED_TO|unix.IN_ONLYDIR)
		return err
	})
	if err != nil {
		return fmt.Errorf("watch %s: %w", dir, err)
	}
	if cur, ok := w.byUID[uid]; ok && cur.wd != int32(wd) {
		w.removeLocked(uid, cur)
	}
	w.byUID[uid] = podWatch{wd: int32(wd), dir: dir}
	w.byWD[int32(wd)] = uid
	return nil
}

// Unwatch stops the events of uid.
func (w *HostPodWatcher) Unwatch(uid string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if cur, ok := w.byUID[uid]; ok && !w.closed {
		w.removeLocked(uid, cur)
	}
}

// Close ends the inotify instance; Events is closed once its reader is
// done.
func (w *HostPodWatcher) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	if w.f == nil {
		close(w.events)
		return nil
	}
	return w.f.Close() // the reader closes events
}

// startLocked creates the inotify instance and its reader.
func (w *HostPodWatcher) startLocked() error {
	if w.f != nil {
		return nil
	}
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return fmt.Errorf("inotify: %w", err)
	}
	// Non-blocking: reads park in the runtime poller and Close ends them.
	w.f = os.NewFile(uintptr(fd), "inotify")
	go w.read(w.f)
	return nil
}

// control runs fn on the instance's descriptor.
func (w *HostPodWatcher) control(fn func(fd int) error) error {
	rc, err := w.f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = fn(int(fd)) }); err != nil {
		return err
	}
	return ferr
}

func (w *HostPodWatcher) removeLocked(uid string, cur podWatch) {
	delete(w.byUID, uid)
	delete(w.byWD, cur.wd)
	_ = w.control(func(fd int) error {
		_, err := unix.InotifyRmWatch(fd, uint32(cur.wd))
		return err
	})
}

// read turns inotify events into UIDs until the instance is closed.
func (w *HostPodWatcher) read(f *os.File) {
	defer close(w.events)
	buf := make([]byte, 64*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	for {
		n, err := f.Read(buf)
		if err != nil {
			return // closed
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			name := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
			off += unix.SizeofInotifyEvent + int(ev.Len)
			w.deliver(ev.Wd, ev.Mask, string(bytes.TrimRight(name, "\x00")))
		}
	}
}

// deliver reports uid of wd when name is one of the watched files; a
// watch the kernel dropped (its directory is gone) is forgotten.
func (w *HostPodWatcher) deliver(wd int32, mask uint32, name string) {
	w.mu.Lock()
	uid, ok := w.byWD[wd]
	if ok && mask&unix.IN_IGNORED != 0 {
		delete(w.byWD, wd)
		if w.byUID[uid].wd == wd {
			delete(w.byUID, uid)
		}
	}
	w.mu.Unlock()
	if !ok || !slices.Contains(w.names, name) {
		return
	}
	select {
	case w.events <- uid:
	default: // full: the safety-net poll covers it
	}
}
