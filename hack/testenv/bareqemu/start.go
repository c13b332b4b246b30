package bareqemu

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodevirt/nodevirt/qmp"
)

// Start runs qemu-system-x86_64 with args plus a QMP server socket, and
// returns its pid and a QMP connection to it. -display none and
// -no-user-config are added; args choose the rest (e.g. -S to hold the
// vCPUs).
func Start(t testing.TB, args ...string) (int, *qmp.Conn) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "qmp.sock")
	args = append(append([]string{"-display", "none", "-no-user-config"}, args...), "-qmp", "unix:"+sock+",server=on,wait=off")
	cmd := exec.Command("qemu-system-x86_64", args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // our own child, by pid
		<-exited
		if t.Failed() {
			t.Logf("qemu stderr: %s", stderr.String())
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		conn, err := qmp.Dial(ctx, sock)
		if err == nil {
			t.Cleanup(func() { conn.Close() })
			return cmd.Process.Pid, conn
		}
		select {
		case <-ctx.Done():
			t.Fatalf("dial QMP: %v; qemu: %s", err, stderr.String())
		case <-exited:
			t.Fatalf("qemu exited: %s", stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
}
