package agent

import (
	"context"
	"fmt"
	"net"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// maxSocketPath is the longest path connect(2) takes for a unix socket
// (sun_path is 108 bytes with its NUL). A kubelet pod path alone,
// /var/lib/kubelet/pods/<uid>/volumes/kubernetes.io~empty-dir/sockets/,
// is 99 bytes, so most launcher sockets are too long to dial by name.
const maxSocketPath = 107

// withSocketPath calls fn with a path to the unix socket at path that fits
// in sun_path: path itself when short enough, else /proc/self/fd/<N>/<name>
// through an O_PATH descriptor of its directory, held open while fn runs.
func withSocketPath(path string, fn func(short string) error) error {
	if len(path) <= maxSocketPath {
		return fn(path)
	}
	dir, name := filepath.Split(path)
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open socket dir %s: %w", dir, err)
	}
	defer unix.Close(fd)
	return fn(fmt.Sprintf("/proc/self/fd/%d/%s", fd, name))
}

// dialUnix connects to the unix socket at path, however long.
func dialUnix(ctx context.Context, path string) (*net.UnixConn, error) {
	var c net.Conn
	err := withSocketPath(path, func(short string) error {
		var d net.Dialer
		var err error
		c, err = d.DialContext(ctx, "unix", short)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", path, err)
	}
	return c.(*net.UnixConn), nil
}
