package agent_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/procfs"

	"github.com/nodevirt/nodevirt/hack/testenv"
	"github.com/nodevirt/nodevirt/node/agent"
	"github.com/nodevirt/nodevirt/node/agent/agenttest"
	"github.com/nodevirt/nodevirt/qmp"
)

// The conformance suites (agenttest/conformance.go) against the fakes the
// sync tests use and against the host implementations.

func TestConformance_Processes(t *testing.T) {
	t.Run("fake", func(t *testing.T) {
		procs := agenttest.NewProcesses(agenttest.NewLog())
		var mu sync.Mutex
		next := 1000
		agenttest.TestProcesses(t, agenttest.ProcessesEnv{
			Processes: procs,
			Start: func(*testing.T) int {
				mu.Lock()
				defer mu.Unlock()
				next++
				procs.Start(next, uint64(next*10))
				return next
			},
			Exit: func(_ *testing.T, pid int) { procs.Exit(pid) },
			Killed: func(_ *testing.T, pid int) bool {
				_, err := procs.Identify(pid)
				return err != nil
			},
		})
	})
	// A sleep child of the test's own is cheap to run for real: no
	// prerequisite, so this runs in -short too.
	t.Run("host", func(t *testing.T) {
		children := map[int]*child{}
		agenttest.TestProcesses(t, agenttest.ProcessesEnv{
			Processes: agent.HostProcesses{},
			Start: func(t *testing.T) int {
				c := startChild(t, exec.Command("sleep", "600"))
				children[c.pid()] = c
				return c.pid()
			},
			Exit:   func(t *testing.T, pid int) { children[pid].kill() },
			Killed: killed,
		})
	})
}

// killed reports whether the host process pid is gone or doomed by
// SIGKILL. When kill(2) returns, a SIGKILL is pending in every thread of
// its target, or the target is already exiting (PF_EXITING) or a zombie,
// or reaped: no waiting needed to tell.
func killed(t *testing.T, pid int) bool {
	t.Helper()
	p, err := procfs.NewProc(pid)
	if errors.Is(err, fs.ErrNotExist) {
		return true
	}
	if err != nil {
		t.Fatal(err)
	}
	st, err := p.Stat()
	if errors.Is(err, fs.ErrNotExist) {
		return true
	}
	if err != nil {
		t.Fatal(err)
	}
	const pfExiting = 0x4
	if st.State == "Z" || st.State == "X" || st.Flags&pfExiting != 0 {
		return true
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if errors.Is(err, fs.ErrNotExist) {
		return true
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		k, v, _ := strings.Cut(line, ":")
		if k != "SigPnd" && k != "ShdPnd" {
			continue
		}
		mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		if err != nil {
			t.Fatalf("%s of %d: %v", k, pid, err)
		}
		if mask&(1<<(syscall.SIGKILL-1)) != 0 {
			return true
		}
	}
	return false
}

func TestConformance_QEMUDialer(t *testing.T) {
	t.Run("fake", func(t *testing.T) {
		const pid = 4242
		q := agenttest.NewQEMU(agenttest.NewLog(), pid)
		agenttest.TestQEMUDialer(t, agenttest.QEMUEnv{
			QEMU: q, QMP: "/nonexistent/qmp.sock", GuestAgent: "/nonexistent/qga.sock",
			Start: func(*testing.T) int {
				q.Listen(qmp.RunStateRunning)
				return pid
			},
		})
	})
	t.Run("host", func(t *testing.T) {
		_, err := exec.LookPath("qemu-system-x86_64")
		testenv.Require(t, err == nil, "qemu-system-x86_64", "guest-deps")
		dir := shortTempDir(t)
		sock := filepath.Join(dir, "qmp.sock")
		agenttest.TestQEMUDialer(t, agenttest.QEMUEnv{
			QEMU: agent.HostQEMU{}, QMP: sock, GuestAgent: filepath.Join(dir, "qga.sock"),
			Start: func(t *testing.T) int { return startBareQEMU(t, sock) },
		})
	})
}

// startBareQEMU starts a QEMU under TCG with no machine and no guest (its
// run state is running all the same) and QMP at sock, and waits until
// QMP accepts a connection. The test's cleanup kills it.
func startBareQEMU(t *testing.T, sock string) int {
	t.Helper()
	c := startChild(t, exec.Command("qemu-system-x86_64",
		"-accel", "tcg", "-machine", "none", "-nodefaults", "-no-user-config",
		"-display", "none", "-monitor", "none", "-serial", "none",
		"-qmp", "unix:"+sock+",server=on,wait=off"))
	testenv.Eventually(t, 30*time.Second, "QEMU's QMP socket to accept", func() error {
		select {
		case <-c.exited:
			t.Fatalf("qemu exited: %s", c.stderr.String())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		nc, err := (&net.Dialer{}).DialContext(ctx, "unix", sock)
		if err == nil {
			nc.Close()
		}
		return err
	})
	return c.pid()
}

// child is a process the test started; only it is ever killed, by pid.
type child struct {
	cmd    *exec.Cmd
	exited chan struct{}
	stderr testenv.LockedBuffer
}

// startChild starts cmd, reaps it when it exits, and kills it when the
// test ends.
func startChild(t *testing.T, cmd *exec.Cmd) *child {
	t.Helper()
	c := &child{cmd: cmd, exited: make(chan struct{})}
	cmd.Stderr = &c.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", cmd.Path, err)
	}
	go func() {
		cmd.Wait()
		close(c.exited)
	}()
	t.Cleanup(func() {
		c.kill()
		if s := c.stderr.String(); t.Failed() && s != "" {
			t.Logf("%s (pid %d) stderr:\n%s", cmd.Path, c.pid(), s)
		}
	})
	return c
}

func (c *child) pid() int { return c.cmd.Process.Pid }

// kill kills the child and returns once it is reaped.
func (c *child) kill() {
	c.cmd.Process.Kill()
	<-c.exited
}

// shortTempDir is a temp directory with a short path: unix socket paths
// are limited to 108 bytes, which t.TempDir can exceed.
func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "agentconf")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}
