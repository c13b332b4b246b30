package agent

import (
	"fmt"
	"net"
	"os"
	"strings"
	"sync"

	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"

	"github.com/nodevirt/nodevirt/store"
)

// peerPID returns the pid (in the agent's PID namespace) of the process at
// the other end of a unix socket connection, by SO_PEERCRED.
func peerPID(c *net.UnixConn) (int, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, err
	}
	if credErr != nil {
		return 0, fmt.Errorf("SO_PEERCRED: %w", credErr)
	}
	return int(cred.Pid), nil
}

// processOf identifies the host process pid by its start time and the
// boot, so that a reused pid is never mistaken for it.
func processOf(pid int) (store.Process, error) {
	st, err := startTime(pid)
	if err != nil {
		return store.Process{}, err
	}
	return store.Process{PID: pid, StartTime: st, BootID: bootID()}, nil
}

// alive reports whether the recorded process still exists.
func alive(p store.Process) bool {
	if p.PID == 0 || (p.BootID != "" && p.BootID != bootID()) {
		return false
	}
	st, err := startTime(p.PID)
	return err == nil && st == p.StartTime
}

// startTime is the start time of process pid (clock ticks after boot).
func startTime(pid int) (uint64, error) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return 0, fmt.Errorf("process %d: %w", pid, err)
	}
	st, err := p.Stat()
	if err != nil {
		return 0, fmt.Errorf("process %d stat: %w", pid, err)
	}
	return st.Starttime, nil
}

// bootID is the kernel's boot ID, read once: it cannot change while this
// process runs, and every observation of a domain asks for it.
var bootID = sync.OnceValue(func() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
})
