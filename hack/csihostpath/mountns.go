package main

import (
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// mountNS runs file-system work in the node's mount namespace: the one the
// kubelet publishes volumes in and the pods' containers are made from.
// The node plugin runs in a container, whose own namespace is a copy: a
// bind mount made there would reach the kubelet only through a
// Bidirectional volume of a shared host mount, which this host's / is not.
// So the plugin (hostPID) enters the namespace of its container's parent,
// the runtime shim, which lives in the node's. A nil mountNS runs in the
// process's own namespace (tests, or a driver run on the host).
type mountNS struct{ f *os.File }

// openParentMountNS opens the mount namespace of this process's parent.
func openParentMountNS() (*mountNS, error) {
	path := fmt.Sprintf("/proc/%d/ns/mnt", os.Getppid())
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("the node's mount namespace: %w (the pod needs hostPID)", err)
	}
	return &mountNS{f: f}, nil
}

// do runs fn on an OS thread that has entered the namespace. The thread
// is never handed back to the Go scheduler: it ends with its goroutine.
func (ns *mountNS) do(fn func() error) error {
	if ns == nil {
		return fn()
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with us
		if err := unix.Unshare(unix.CLONE_FS); err != nil {
			errc <- fmt.Errorf("unshare CLONE_FS: %w", err)
			return
		}
		if err := unix.Setns(int(ns.f.Fd()), unix.CLONE_NEWNS); err != nil {
			errc <- fmt.Errorf("setns %s: %w", ns.f.Name(), err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}
