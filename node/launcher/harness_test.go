package launcher_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
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

	"github.com/nodevirt/nodevirt/hack/testenv"
	"github.com/nodevirt/nodevirt/node/launcher"
	"github.com/nodevirt/nodevirt/node/launchspec"
)

const bootTimeout = 90 * time.Second

// launcherBin is the nodevirt-launcher built once by TestMain.
var launcherBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "nodevirt-launcher-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	launcherBin = filepath.Join(dir, "nodevirt-launcher")
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// guestDir returns the built test guest's directory, after checking QEMU.
func guestDir(t *testing.T) string {
	t.Helper()
	_, err := os.Stat(launcher.DefaultQEMU)
	testenv.Require(t, err == nil, launcher.DefaultQEMU, "guest-deps")
	return testenv.GuestDir(t, "vmlinux", "initrd.img", "disk.qcow2")
}

var buildOnce sync.Once
var buildErr error

// buildLauncher builds cmd/nodevirt-launcher as CI builds it (static).
func buildLauncher(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		cmd := exec.Command("go", "build", "-trimpath", "-o", launcherBin, "github.com/nodevirt/nodevirt/cmd/nodevirt-launcher")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return launcherBin
}

// pod is a temp directory laid out like the launcher pod's volumes.
type pod struct {
	paths launchspec.Paths
	// imageVolumes: the pod has the ImageVolumes shape; the test mounts
	// its "image volumes" under paths.Images (mountImage).
	imageVolumes bool
}

// mountImage stands in for the kubelet mounting an image volume at dir:
// files maps paths inside the image to files of the test guest, which are
// linked (or copied) there as regular files, as an image holds them.
func mountImage(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for inImage, src := range files {
		dst := filepath.Join(dir, inImage)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if os.Link(src, dst) == nil {
			continue
		}
		b, err := os.ReadFile(src)
		if err == nil {
			err = os.WriteFile(dst, b, 0o444)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func newPod(t *testing.T) *pod {
	dir := t.TempDir()
	p := launchspec.Paths{
		Sockets: filepath.Join(dir, "sockets"),
		Private: filepath.Join(dir, "private"),
		PVCs:    filepath.Join(dir, "pvcs"),
		Block:   filepath.Join(dir, "dev"),
		Images:  filepath.Join(dir, "images"),
	}
	for _, d := range []string{p.Sockets, p.Private} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return &pod{paths: p}
}

// proc is a child process the test started; Cleanup kills it by pid.
type proc struct {
	cmd    *exec.Cmd
	done   chan struct{}
	stderr *testenv.LockedBuffer
}

func startProc(t *testing.T, name string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(name, args...), done: make(chan struct{}), stderr: &testenv.LockedBuffer{}}
	p.cmd.Stdout, p.cmd.Stderr = p.stderr, p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", filepath.Base(name), p.stderr.String())
		}
	})
	return p
}

// wait returns the exit code once the process ended, or fails after timeout.
func (p *proc) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(timeout):
		t.Fatalf("process %d still running after %v", p.cmd.Process.Pid, timeout)
		return 0
	}
}

// startLauncher runs `nodevirt-launcher run` for pod and waits for its API.
func startLauncher(t *testing.T, pd *pod) (*proc, *launcher.Client) {
	t.Helper()
	bin := buildLauncher(t)
	p := startProc(t, bin, "run", "--sockets", pd.paths.Sockets, "--private", pd.paths.Private,
		"--pvcs", pd.paths.PVCs, "--block", pd.paths.Block, "--linger", "300ms", "--kill-wait", "2s")
	c := launcher.NewClient(pd.paths.Socket(launchspec.LauncherSocket))
	testenv.Eventually(t, 10*time.Second, "launcher API", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := c.Status(ctx)
		return err
	})
	return p, c
}

// waitRunning polls the launcher until QEMU runs. QEMU dies with the
// launcher (PR_SET_PDEATHSIG); a cleanup kills it by pid as a second guard.
func waitRunning(t *testing.T, c *launcher.Client) launcher.Status {
	t.Helper()
	var st launcher.Status
	testenv.Eventually(t, 60*time.Second, "QEMU running", func() error {
		var err error
		st, err = c.Status(context.Background())
		if err != nil {
			return err
		}
		if st.State == launcher.StateExited {
			t.Fatalf("launcher exited: %+v", st)
		}
		if st.State != launcher.StateRunning {
			return fmt.Errorf("state %s", st.State)
		}
		return nil
	})
	t.Cleanup(func() { _ = syscall.Kill(st.QEMUPid, syscall.SIGKILL) })
	return st
}

// serial reads the guest's serial console (QEMU listens on serial.sock).
type serial struct {
	mu    sync.Mutex
	lines []string
	conn  net.Conn
}

func dialSerial(t *testing.T, path string) *serial {
	t.Helper()
	s := &serial{}
	testenv.Eventually(t, 10*time.Second, "serial console", func() error {
		c, err := net.Dial("unix", path)
		if err == nil {
			s.conn = c
		}
		return err
	})
	t.Cleanup(func() { s.conn.Close() })
	go func() {
		sc := bufio.NewScanner(s.conn)
		for sc.Scan() {
			s.mu.Lock()
			s.lines = append(s.lines, strings.TrimRight(sc.Text(), "\r"))
			s.mu.Unlock()
		}
	}()
	return s
}

// waitLine waits for a line starting with prefix and returns it.
func (s *serial) waitLine(t *testing.T, prefix string, timeout time.Duration) string {
	t.Helper()
	var line string
	testenv.Eventually(t, timeout, fmt.Sprintf("serial line %q", prefix), func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, l := range s.lines {
			if strings.HasPrefix(l, prefix) {
				line = l
				return nil
			}
		}
		return fmt.Errorf("console:\n%s", strings.Join(s.lines, "\n"))
	})
	return line
}

// find returns the first line starting with prefix, without waiting.
func (s *serial) find(prefix string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.lines {
		if strings.HasPrefix(l, prefix) {
			return l, true
		}
	}
	return "", false
}

// text is everything read so far.
func (s *serial) text() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.lines, "\n")
}

// readExit reads sockets/qemu-exit.json.
func readExit(t *testing.T, pd *pod) launcher.Exit {
	t.Helper()
	b, err := os.ReadFile(pd.paths.Socket(launchspec.ExitFile))
	if err != nil {
		t.Fatalf("exit file: %v", err)
	}
	var e launcher.Exit
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatalf("exit file %q: %v", b, err)
	}
	return e
}

// rssKiB returns VmRSS and VmHWM of pid in KiB.
func rssKiB(t *testing.T, pid int) (rss, hwm int) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "VmRSS:":
			rss, _ = strconv.Atoi(f[1])
		case "VmHWM:":
			hwm, _ = strconv.Atoi(f[1])
		}
	}
	if rss == 0 {
		t.Fatalf("no VmRSS for pid %d", pid)
	}
	return rss, hwm
}
