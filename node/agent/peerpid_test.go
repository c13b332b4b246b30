package agent

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodevirt/nodevirt/node/unixsock"
)

func TestPeerPID_LongPath(t *testing.T) {
	dir := filepath.Join(t.TempDir(), strings.Repeat("d", 60), strings.Repeat("e", 60))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "test.sock")
	if len(path) <= unixsock.MaxPath {
		t.Fatalf("path %q is not long enough for this test", path)
	}
	l, err := unixsock.Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		if c, err := l.Accept(); err == nil {
			c.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := unixsock.Dial(ctx, path)
	if err != nil {
		t.Fatalf("Dial(%d-byte path): %v", len(path), err)
	}
	pid, err := peerPID(c)
	c.Close()
	if err != nil || pid != os.Getpid() {
		t.Errorf("peerPID = %d, %v; want %d", pid, err, os.Getpid())
	}
}
