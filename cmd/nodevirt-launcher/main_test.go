package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nodevirt/nodevirt/node/launchspec"
)

func TestInstallAndCopy(t *testing.T) {
	dir := t.TempDir()
	dst := filepath.Join(dir, "bin", "nodevirt-launcher")
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if code := installCmd([]string{dst}); code != 0 {
		t.Fatalf("install exited %d", code)
	}
	if fi, err := os.Stat(dst); err != nil || fi.Mode().Perm() != 0o755 || fi.Size() == 0 {
		t.Errorf("installed binary: %v, %v", fi, err)
	}

	src := filepath.Join(dir, "boot", "vmlinux=odd")
	if err := os.MkdirAll(filepath.Dir(src), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(src, []byte("kernel"), 0o600); err != nil {
		t.Fatal(err)
	}
	to := filepath.Join(dir, "private", "kernel")
	if code := copyCmd([]string{"--to", to, src + "=kernel"}); code != 0 {
		t.Fatalf("copy exited %d", code)
	}
	if b, err := os.ReadFile(filepath.Join(to, "kernel")); err != nil || string(b) != "kernel" {
		t.Errorf("copied kernel = %q, %v", b, err)
	}
	for _, bad := range [][]string{{"--to", to, src}, {"--to", to, src + "=../x"}, {src + "=k"}} {
		if code := copyCmd(bad); code == 0 {
			t.Errorf("copy %q succeeded", bad)
		}
	}
}

func TestWritePID(t *testing.T) {
	p := filepath.Join(t.TempDir(), "disks", "root.pid")
	if err := writePID(p); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(os.Getpid()) {
		t.Errorf("pid file = %q, %v", b, err)
	}
}

// TestHoldDisk_ExitsWhenTheLauncherEnded: a holder runs until the
// launcher's end marker appears next to its pid file (then the pod can
// complete), and markDone writes that marker where holders look.
func TestHoldDisk_ExitsWhenTheLauncherEnded(t *testing.T) {
	sockets := t.TempDir()
	pidFile := launchspec.Paths{Sockets: sockets}.HolderPIDFile("root")
	code := make(chan int, 1)
	go func() { code <- holdDiskCmd([]string{"--pid-file", pidFile}) }()
	select {
	case c := <-code:
		t.Fatalf("holder exited %d before the launcher ended", c)
	case <-time.After(1500 * time.Millisecond):
	}
	if _, err := os.Stat(pidFile); err != nil {
		t.Fatalf("holder's pid file: %v", err)
	}
	markDone(sockets, slog.New(slog.DiscardHandler))
	select {
	case c := <-code:
		if c != 0 {
			t.Errorf("holder exited %d, want 0", c)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("holder still running after the launcher's end marker")
	}
}
