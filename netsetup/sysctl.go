package netsetup

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// ipForward is the netns's IPv4 forwarding switch (net.ipv4.ip_forward).
const ipForward = "/proc/sys/net/ipv4/ip_forward"

// sysctlFile is a /proc/sys file opened in a pod netns (openPodSockets):
// it reads and writes that netns's value from any thread.
type sysctlFile struct{ *os.File }

// ensure writes val unless the file already holds it.
func (f sysctlFile) ensure(val string) (bool, error) {
	buf := make([]byte, 64)
	n, err := f.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return false, fmt.Errorf("read %s: %w", f.Name(), err)
	}
	if strings.TrimSuffix(string(buf[:n]), "\n") == val {
		return false, nil
	}
	if _, err := f.WriteAt([]byte(val), 0); err != nil {
		return false, fmt.Errorf("write %s: %w", f.Name(), err)
	}
	return true, nil
}
