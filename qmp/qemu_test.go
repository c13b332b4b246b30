package qmp_test

// A harness for tests against real QEMU under TCG booting the test guest
// (hack/guest, built by `make guest-images`).

import (
	"bufio"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nodevirt/nodevirt/hack/testenv"
	"github.com/nodevirt/nodevirt/qmp"
)

const (
	readyMarker = "NODEVIRT-GUEST-READY"
	bootTimeout = 60 * time.Second
)

// guestDir returns the directory holding the built test guest.
func guestDir(t testing.TB) string {
	t.Helper()
	return testenv.GuestDir(t, "vmlinux", "initrd.img", "disk.img", "disk.qcow2")
}

// vmConfig describes a test VM. The zero value boots vmlinux + initrd.img
// on q35 with 256 MiB, a guest agent port, a balloon and -no-reboot unless
// Reboot is set.
type vmConfig struct {
	Disk     string   // boot this disk image (raw or qcow2, by extension) instead of the kernel
	Drives   []string // extra -drive/-device argument pairs, already formatted
	Append   string   // extra kernel arguments
	Reboot   bool     // let guest resets reboot instead of ending QEMU
	Incoming string   // -incoming value (e.g. "defer")
	Args     []string // further QEMU arguments
	NetNS    string   // run QEMU in this network namespace (ip netns exec)
}

// testVM is one QEMU process. Cleanup kills it (by pid) and removes its files.
type testVM struct {
	dir     string // short: unix socket paths are limited to 108 bytes
	QMP     string
	QGA     string
	cmd     *exec.Cmd
	exited  chan struct{}
	serial  *serialLog
	stderr  testenv.LockedBuffer
	started time.Time
}

func startVM(t testing.TB, cfg vmConfig) *testVM {
	t.Helper()
	guest := guestDir(t)
	dir, err := os.MkdirTemp("", "qmpvm")
	if err != nil {
		t.Fatal(err)
	}
	vm := &testVM{
		dir:    dir,
		QMP:    filepath.Join(dir, "qmp.sock"),
		QGA:    filepath.Join(dir, "qga.sock"),
		exited: make(chan struct{}),
	}
	serialPath := filepath.Join(dir, "serial.sock")
	vm.serial, err = listenSerial(serialPath)
	if err != nil {
		os.RemoveAll(dir)
		t.Fatal(err)
	}

	args := []string{
		"-accel", "tcg", "-cpu", "max", "-machine", "q35", "-m", "256", "-smp", "1",
		"-nodefaults", "-no-user-config", "-display", "none",
		"-qmp", "unix:" + vm.QMP + ",server=on,wait=off",
		"-chardev", "socket,id=ser0,path=" + serialPath, "-serial", "chardev:ser0",
		"-device", "virtio-serial-pci,id=vser0",
		"-chardev", "socket,id=qga0,path=" + vm.QGA + ",server=on,wait=off",
		"-device", "virtserialport,bus=vser0.0,chardev=qga0,name=org.qemu.guest_agent.0",
		"-device", "virtio-balloon-pci,id=balloon0",
	}
	if !cfg.Reboot {
		args = append(args, "-no-reboot")
	}
	if cfg.Disk != "" {
		format := "raw"
		if strings.HasSuffix(cfg.Disk, ".qcow2") {
			format = "qcow2"
		}
		args = append(args,
			"-drive", "file="+cfg.Disk+",if=none,id=disk0,format="+format+",snapshot=on",
			"-device", "virtio-blk-pci,drive=disk0,bootindex=1")
	} else {
		args = append(args,
			"-kernel", filepath.Join(guest, "vmlinux"),
			"-initrd", filepath.Join(guest, "initrd.img"),
			"-append", strings.TrimSpace("console=ttyS0 quiet panic=-1 "+cfg.Append))
	}
	args = append(args, cfg.Drives...)
	if cfg.Incoming != "" {
		args = append(args, "-incoming", cfg.Incoming)
	}
	args = append(args, cfg.Args...)

	if cfg.NetNS != "" {
		// ip netns exec execs QEMU: the pid we hold is QEMU's.
		args = append([]string{"netns", "exec", cfg.NetNS, "qemu-system-x86_64"}, args...)
		vm.cmd = exec.Command("ip", args...)
	} else {
		vm.cmd = exec.Command("qemu-system-x86_64", args...)
	}
	vm.cmd.Stderr = &vm.stderr
	vm.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	vm.started = time.Now()
	if err := vm.cmd.Start(); err != nil {
		vm.serial.Close()
		os.RemoveAll(dir)
		t.Fatalf("start qemu: %v", err)
	}
	go func() {
		vm.cmd.Wait()
		close(vm.exited)
	}()
	t.Cleanup(func() {
		vm.cmd.Process.Kill() // our own child, by pid
		<-vm.exited
		vm.serial.Close()
		if t.Failed() {
			t.Logf("qemu pid %d stderr:\n%s\nserial:\n%s", vm.cmd.Process.Pid, vm.stderr.String(), strings.Join(vm.serial.Lines(), "\n"))
		}
		os.RemoveAll(dir)
	})
	return vm
}

// DialQMP connects to the VM's QMP socket, retrying until QEMU listens.
func (vm *testVM) DialQMP(t testing.TB) *qmp.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		c, err := qmp.Dial(ctx, vm.QMP)
		if err == nil {
			t.Cleanup(func() { c.Close() })
			return c
		}
		select {
		case <-ctx.Done():
			t.Fatalf("dial QMP: %v", err)
		case <-vm.exited:
			t.Fatalf("qemu exited: %s", vm.stderr.String())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// DialAgent connects to the VM's guest agent socket and waits until the
// agent answers.
func (vm *testVM) DialAgent(t testing.TB) *qmp.Agent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := qmp.DialAgent(ctx, vm.QGA)
	if err != nil {
		t.Fatalf("dial agent: %v", err)
	}
	t.Cleanup(func() { a.Close() })
	waitAgent(t, ctx, a)
	return a
}

// waitAgent retries Sync until the guest agent answers or ctx ends.
func waitAgent(t testing.TB, ctx context.Context, a *qmp.Agent) {
	t.Helper()
	for {
		actx, cancel := context.WithTimeout(ctx, time.Second)
		err := a.Sync(actx)
		cancel()
		if err == nil {
			return
		}
		if ctx.Err() != nil || errors.Is(err, qmp.ErrClosed) {
			t.Fatalf("guest agent does not answer: %v", err)
		}
	}
}

// WaitSerial waits for the n-th (1-based) serial line starting with prefix.
func (vm *testVM) WaitSerial(t testing.TB, prefix string, n int, timeout time.Duration) string {
	t.Helper()
	line, err := vm.serial.Wait(prefix, n, timeout, vm.exited)
	if err != nil {
		t.Fatalf("serial %q #%d: %v", prefix, n, err)
	}
	return line
}

// Exited reports whether QEMU ended within timeout.
func (vm *testVM) Exited(timeout time.Duration) bool {
	select {
	case <-vm.exited:
		return true
	case <-time.After(timeout):
		return false
	}
}

// serialLog collects the guest's serial console, line by line. QEMU connects
// to it as a client, so nothing printed before we read is lost.
type serialLog struct {
	ln      net.Listener
	mu      sync.Mutex
	conn    net.Conn
	lines   []string
	changed chan struct{} // closed and replaced on every new line
}

func listenSerial(path string) (*serialLog, error) {
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	s := &serialLog{ln: ln, changed: make(chan struct{})}
	go s.read()
	return s, nil
}

func (s *serialLog) read() {
	c, err := s.ln.Accept()
	if err != nil {
		return
	}
	s.mu.Lock()
	s.conn = c
	s.mu.Unlock()
	sc := bufio.NewScanner(c)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		s.add(strings.TrimRight(sc.Text(), "\r"))
	}
}

func (s *serialLog) Close() {
	s.ln.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil {
		s.conn.Close()
	}
}

func (s *serialLog) Lines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.lines...)
}

func (s *serialLog) add(line string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lines = append(s.lines, line)
	close(s.changed)
	s.changed = make(chan struct{})
}

// Wait returns the n-th line starting with prefix.
func (s *serialLog) Wait(prefix string, n int, timeout time.Duration, exited <-chan struct{}) (string, error) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		seen := 0
		for _, l := range s.lines {
			if strings.HasPrefix(l, prefix) {
				seen++
				if seen == n {
					s.mu.Unlock()
					return l, nil
				}
			}
		}
		changed := s.changed
		s.mu.Unlock()
		select {
		case <-changed:
		case <-exited:
			exited = nil // QEMU is gone: give the reader a moment, then time out
			deadline.Reset(200 * time.Millisecond)
		case <-deadline.C:
			return "", errors.New("timed out")
		}
	}
}
