package launcher

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nodevirt/nodevirt/hack/testenv"
	"github.com/nodevirt/nodevirt/node/launchspec"
)

// startServer runs a Server whose QEMU is a missing binary: enough for the
// API paths that never start QEMU.
func startServer(t *testing.T) (*Server, *Client, string, <-chan *Exit) {
	t.Helper()
	dir := t.TempDir()
	s, err := NewServer(Config{SocketsDir: dir, PrivateDir: filepath.Join(dir, "private"),
		QEMU: filepath.Join(dir, "no-qemu"), Linger: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan *Exit, 1)
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		e, err := s.Run(context.Background())
		if err != nil {
			t.Errorf("Run: %v", err)
		}
		done <- e
	}()
	// A launch the test left running still writes under dir: stop it and
	// wait for Run before TempDir's cleanup (registered earlier, run later)
	// removes dir.
	t.Cleanup(func() {
		s.Stop()
		<-finished
	})
	c := NewClient(filepath.Join(dir, launchspec.LauncherSocket))
	testenv.Eventually(t, 5*time.Second, "the launcher API", func() error {
		_, err := c.Status(context.Background())
		return err
	})
	return s, c, dir, done
}

func sealed(t testing.TB, s launchspec.Spec) launchspec.Spec {
	t.Helper()
	if err := s.Seal(); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestServer_RejectsBadSpecs(t *testing.T) {
	s, c, dir, done := startServer(t)
	tests := []struct {
		name string
		spec launchspec.Spec
	}{
		{"unsealed", launchspec.Spec{Version: 1, Args: []string{"-S"}}},
		{"no args", sealed(t, launchspec.Spec{})},
		{"target outside private", sealed(t, launchspec.Spec{Args: []string{"-S"}, Disks: []launchspec.DiskPrep{
			{Volume: "e", Kind: launchspec.EmptyDisk, Target: filepath.Join(dir, "sockets-escape.img"), Format: "raw", SizeBytes: 1}}})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.Launch(context.Background(), tt.spec)
			var apiErr *APIError
			if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 {
				t.Errorf("Launch = %v, want a 400 APIError", err)
			}
		})
	}
	if st, _ := c.Status(context.Background()); st.State != StateWaiting {
		t.Errorf("state after bad specs = %s, want waiting", st.State)
	}
	s.Stop()
	if e := <-done; e != nil {
		t.Errorf("Run after Stop without launch = %+v, want nil", e)
	}
}

func TestServer_LaunchFailureIsRecorded(t *testing.T) {
	_, c, dir, done := startServer(t)
	spec := sealed(t, launchspec.Spec{Args: []string{"-S"}})
	if _, err := c.Launch(context.Background(), spec); err != nil {
		t.Fatalf("Launch: %v", err)
	}
	e := <-done
	if e == nil || e.Success() || e.Reason != "launch-failed" || e.Error == "" {
		t.Errorf("exit = %+v, want a failed launch with its error", e)
	}
	if _, err := os.Stat(filepath.Join(dir, launchspec.ExitFile)); err != nil {
		t.Errorf("exit file: %v", err)
	}
}

func TestServer_StopWhilePreparing(t *testing.T) {
	s, c, dir, done := startServer(t)
	spec := sealed(t, launchspec.Spec{Args: []string{"-S"}, Disks: []launchspec.DiskPrep{{
		Volume: "root", Kind: launchspec.ContainerDisk, Target: filepath.Join(dir, "private", "overlays", "root.qcow2"),
		Format: "qcow2", HolderPIDFile: filepath.Join(dir, "disks", "root.pid"), // never written
	}}})
	st, err := c.Launch(context.Background(), spec)
	if err != nil || st.State != StatePreparing {
		t.Fatalf("Launch = %+v, %v; want preparing", st, err)
	}
	t0 := time.Now()
	s.Stop()
	select {
	case e := <-done:
		if e == nil || e.Success() {
			t.Errorf("exit = %+v, want a failed launch", e)
		}
		if d := time.Since(t0); d > 5*time.Second {
			t.Errorf("Stop while waiting for the disk holder took %v", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after Stop while preparing")
	}
}

// TestListenInPlace: the socket appears under its name already accepting
// (the agent dials it on inotify's word that the name exists), a stale
// socket of an earlier launcher is replaced, and no temporary name is left.
func TestListenInPlace(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, launchspec.LauncherSocket)
	for _, stale := range []string{path, path + ".tmp"} {
		if err := os.WriteFile(stale, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ln, err := listenInPlace(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if _, err := os.Stat(path + ".tmp"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temporary name left: %v", err)
	}
	accepted := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			c.Close()
		}
		accepted <- err
	}()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("dial %s: %v", path, err)
	}
	c.Close()
	if err := <-accepted; err != nil {
		t.Fatal(err)
	}
}
