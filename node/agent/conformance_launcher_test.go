package agent_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/nodevirt/nodevirt/hack/testenv"
	"github.com/nodevirt/nodevirt/node/agent"
	"github.com/nodevirt/nodevirt/node/agent/agenttest"
	"github.com/nodevirt/nodevirt/node/launcher"
	"github.com/nodevirt/nodevirt/node/launchspec"
	"github.com/nodevirt/nodevirt/store"
)

func TestConformance_Launcher(t *testing.T) {
	t.Run("fake", func(t *testing.T) {
		const pid = 4243
		l := agenttest.NewLauncher(agenttest.NewLog(), pid)
		l.Down()
		agenttest.TestLauncher(t, agenttest.LauncherEnv{
			Launcher: l, Socket: "/nonexistent/launcher.sock",
			Spec:  sealedSpec(t, "a", []string{"-S"}),
			Other: sealedSpec(t, "b", []string{"-S"}),
			Start: func(*testing.T) int {
				l.Set(launcher.Status{State: launcher.StateWaiting})
				return pid
			},
		})
	})
	// The real launcher server runs in the test process (so its pid is
	// ours) and starts a real QEMU with no machine, paused.
	t.Run("host", func(t *testing.T) {
		qemu, err := exec.LookPath("qemu-system-x86_64")
		testenv.Require(t, err == nil, "qemu-system-x86_64", "guest-deps")
		dir := shortTempDir(t)
		paths := launchspec.Paths{Sockets: dir, Private: filepath.Join(dir, "private")}
		args := []string{"-accel", "tcg", "-machine", "none", "-nodefaults", "-no-user-config",
			"-display", "none", "-S",
			"-qmp", "unix:" + paths.Socket(launchspec.QMPSocket) + ",server=on,wait=off"}
		agenttest.TestLauncher(t, agenttest.LauncherEnv{
			Launcher: agent.HostLauncher{}, Socket: paths.Socket(launchspec.LauncherSocket),
			Spec:  sealedSpec(t, "a", args),
			Other: sealedSpec(t, "b", args),
			Start: func(t *testing.T) int { return startLauncher(t, qemu, paths) },
		})
	})
}

// sealedSpec is a sealed spec of the VMI default/name with QEMU args.
func sealedSpec(t *testing.T, name string, args []string) launchspec.Spec {
	t.Helper()
	s := launchspec.Spec{VMI: launchspec.VMIRef{Namespace: "default", Name: name, UID: "uid-" + name}, Args: args}
	if err := s.Seal(); err != nil {
		t.Fatal(err)
	}
	return s
}

// startLauncher runs a launcher server in the test process, with qemu as
// its QEMU, and waits until its API answers. When the test ends it
// cancels the server's context, which must end the server and kill its
// QEMU, and checks that the QEMU it ran is gone.
func startLauncher(t *testing.T, qemu string, paths launchspec.Paths) int {
	t.Helper()
	var out testenv.LockedBuffer
	s, err := launcher.NewServer(launcher.Config{
		SocketsDir: paths.Sockets, PrivateDir: paths.Private, QEMU: qemu,
		Linger: 10 * time.Millisecond, QEMUOutput: &out,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() {
		_, err := s.Run(ctx)
		ran <- err
	}()
	t.Cleanup(func() { stopLauncher(t, s, cancel, ran, &out) })
	c := launcher.NewClient(paths.Socket(launchspec.LauncherSocket))
	testenv.Eventually(t, 10*time.Second, "the launcher API", func() error {
		cctx, ccancel := context.WithTimeout(context.Background(), time.Second)
		defer ccancel()
		_, err := c.Status(cctx)
		return err
	})
	return os.Getpid()
}

// stopLauncher cancels the launcher's context and checks that Run returns
// and that the QEMU it ran, if any, is gone.
func stopLauncher(t *testing.T, s *launcher.Server, cancel context.CancelFunc, ran <-chan error, out *testenv.LockedBuffer) {
	t.Helper()
	procs := agent.HostProcesses{}
	var id store.Process
	qemu, identified := s.Status().QEMUPid, false
	if qemu > 0 {
		var err error
		id, err = procs.Identify(qemu)
		identified = err == nil
		if err != nil {
			t.Errorf("QEMU %d of a running launcher: %v", qemu, err)
		}
	}
	cancel()
	select {
	case err := <-ran:
		if err != nil {
			t.Errorf("launcher Run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("launcher Run did not return within 30s of its context's end")
		if identified {
			procs.Kill(id) // leave no QEMU behind
		}
		return
	}
	if identified && procs.Alive(id) {
		t.Errorf("QEMU %d still alive after the launcher ended", qemu)
		procs.Kill(id)
	}
	if t.Failed() {
		t.Logf("QEMU output:\n%s", out.String())
	}
}
