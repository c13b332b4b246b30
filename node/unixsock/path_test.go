package unixsock

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func longDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), strings.Repeat("d", 60), strings.Repeat("e", 60))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestListenDial_LongPath(t *testing.T) {
	path := filepath.Join(longDir(t), "test.sock")
	if len(path) <= MaxPath {
		t.Fatalf("path %q is not long enough for this test", path)
	}
	l, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan error, 1)
	go func() {
		c, err := l.Accept()
		if err == nil {
			_, err = c.Write([]byte("hi"))
			c.Close()
		}
		accepted <- err
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := Dial(ctx, path)
	if err != nil {
		t.Fatalf("Dial(%d-byte path): %v", len(path), err)
	}
	buf := make([]byte, 2)
	if _, err := c.Read(buf); err != nil || string(buf) != "hi" {
		t.Errorf("read %q, %v; want hi", buf, err)
	}
	c.Close()
	if err := <-accepted; err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("the socket is not at its real path: %v", err)
	}
	l.Close()
	if _, err := os.Stat(path); err != nil {
		t.Errorf("Close removed the socket (the caller removes it): %v", err)
	}
}

func TestDial_Missing(t *testing.T) {
	path := filepath.Join(longDir(t), "missing.sock")
	if _, err := Dial(context.Background(), path); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("Dial of a missing socket: %v, want an error naming %s", err, path)
	}
}

func TestWithPath_Short(t *testing.T) {
	err := WithPath("/run/x.sock", func(short string) error {
		if short != "/run/x.sock" {
			t.Errorf("short path rewritten to %q", short)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
