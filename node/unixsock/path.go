package unixsock

import (
	"context"
	"fmt"
	"net"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// MaxPath is the longest unix socket path bind(2) and connect(2) take
// (sun_path is 108 bytes with its NUL).
const MaxPath = 107

// WithPath calls fn with a name for the socket at path that fits in
// sun_path: path itself when it is short enough, else
// /proc/self/fd/<N>/<name> through an O_PATH descriptor of its directory,
// which stays open while fn runs.
func WithPath(path string, fn func(short string) error) error {
	if len(path) <= MaxPath {
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

// Dial connects to the unix socket at path, however long.
func Dial(ctx context.Context, path string) (*net.UnixConn, error) {
	var c net.Conn
	err := WithPath(path, func(short string) error {
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

// Listen binds a unix socket at path, however long. Closing the listener
// does not remove the socket file: its bound name may be a /proc alias
// that no longer resolves, so the caller removes path.
func Listen(path string) (*net.UnixListener, error) {
	var l net.Listener
	err := WithPath(path, func(short string) error {
		var err error
		l, err = net.Listen("unix", short)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", path, err)
	}
	ul := l.(*net.UnixListener)
	ul.SetUnlinkOnClose(false)
	return ul, nil
}
