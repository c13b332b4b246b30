package launcher

import (
	"context"
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// PeerPID connects to the unix socket at path and returns the pid of the
// process that created the listening socket, as SO_PEERCRED reports it: in
// the caller's PID namespace. On launcher.sock it is the launcher's host
// pid (so the pod's netns is /proc/<pid>/ns/net); on qmp.sock it is QEMU's.
func PeerPID(ctx context.Context, path string) (int, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return 0, fmt.Errorf("peer pid of %s: %w", path, err)
	}
	defer c.Close()
	raw, err := c.(*net.UnixConn).SyscallConn()
	if err != nil {
		return 0, fmt.Errorf("peer pid of %s: %w", path, err)
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, fmt.Errorf("peer pid of %s: %w", path, err)
	}
	if credErr != nil {
		return 0, fmt.Errorf("peer pid of %s: SO_PEERCRED: %w", path, credErr)
	}
	return int(cred.Pid), nil
}
