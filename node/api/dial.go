package api

import (
	"context"
	"fmt"
	"net"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// maxSocketPath is the longest path connect(2) takes (sun_path, 108 bytes
// with its NUL); kubelet pod socket paths are often longer.
const maxSocketPath = 107

// dialSocket connects to the unix socket at path, however long: a long
// path is reached through /proc/self/fd/<N>/<name> of an O_PATH
// descriptor of its directory.
func dialSocket(ctx context.Context, path string) (net.Conn, error) {
	short := path
	if len(path) > maxSocketPath {
		dir, name := filepath.Split(path)
		fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("open socket dir %s: %w", dir, err)
		}
		defer unix.Close(fd)
		short = fmt.Sprintf("/proc/self/fd/%d/%s", fd, name)
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", short)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", path, err)
	}
	return c, nil
}
