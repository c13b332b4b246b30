package launcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodevirt/nodevirt/node/launchspec"
	"github.com/nodevirt/nodevirt/qmp"
)

// monitorArgs give QEMU the launcher's private monitor on fd 3.
var monitorArgs = []string{"-chardev", "socket,id=launcher-mon,fd=3", "-mon", "chardev=launcher-mon,mode=control"}

// qemuProc is a started QEMU.
type qemuProc struct {
	cmd    *exec.Cmd
	mon    *qmp.Conn
	events *qmp.Subscription
	waited chan struct{} // closed when cmd.Wait returned
	// migratedAway: an outgoing migration completed; see watchMigration,
	// which closes migWatched when QEMU's monitor ended.
	migratedAway atomic.Bool
	migWatched   chan struct{}
	tpm          *swtpmProc // nil without devices.tpm
}

// launch prepares disks, starts QEMU and supervises it; it runs in its own
// goroutine after a spec was accepted.
func (s *Server) launch(spec launchspec.Spec) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	start := time.Now()
	if err := s.prepareDisks(ctx, spec.Disks); err != nil {
		s.fail(err)
		return
	}
	tpm, err := s.startTPM(ctx, spec.TPM)
	if err != nil {
		s.fail(err)
		return
	}
	p, err := s.startQEMU(ctx, spec)
	if err != nil {
		tpm.kill()
		s.fail(err)
		return
	}
	p.tpm = tpm
	now := time.Now()
	s.mu.Lock()
	s.qemu = p
	s.status.State = StateRunning
	s.status.QEMUPid = p.cmd.Process.Pid
	s.status.StartedAt = &now
	st := s.status
	s.mu.Unlock()
	s.writeState(launchspec.RunningFile, st)
	s.log.Info("QEMU running", "pid", p.cmd.Process.Pid, "prepare", now.Sub(start))
	cancel()
	s.supervise(p, spec)
}

// fail records a launch that never got QEMU running.
func (s *Server) fail(err error) {
	s.log.Error("launch failed", "err", err)
	e := &Exit{Code: -1, Reason: "launch-failed", Error: err.Error(), At: time.Now()}
	s.writeExit(e)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setExitedLocked(e, err.Error())
}

func (s *Server) startQEMU(ctx context.Context, spec launchspec.Spec) (*qemuProc, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("monitor socketpair: %w", err)
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "launcher-mon"), os.NewFile(uintptr(fds[1]), "qemu-mon")
	defer ours.Close()
	args := slices.Clone(spec.Args)
	if spec.RTC != nil {
		// The guest clock's base is computed now, as QEMU starts.
		base, err := spec.RTC.Base(time.Now())
		if err != nil {
			theirs.Close()
			return nil, err
		}
		args = append(args, "-rtc", base)
	}
	cmd := exec.Command(s.cfg.QEMU, append(args, monitorArgs...)...)
	cmd.ExtraFiles = []*os.File{theirs} // fd 3
	cmd.Stdout, cmd.Stderr = s.cfg.QEMUOutput, s.cfg.QEMUOutput
	// QEMU must not outlive the launcher.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	err = cmd.Start()
	theirs.Close()
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", s.cfg.QEMU, err)
	}
	p := &qemuProc{cmd: cmd, waited: make(chan struct{}), migWatched: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.waited)
	}()
	nc, err := net.FileConn(ours)
	if err == nil {
		hctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		p.mon, err = qmp.NewConn(hctx, nc, "launcher monitor")
		cancel()
	}
	if err != nil {
		_ = cmd.Process.Kill()
		<-p.waited
		return nil, fmt.Errorf("QEMU monitor (QEMU %s): %w", p.cmd.ProcessState, err)
	}
	p.events = p.mon.Subscribe(64, qmp.EventShutdown, qmp.EventReset)
	go p.watchMigration(p.mon.Subscribe(16, qmp.EventMigration), slices.Contains(spec.Args, "-incoming"))
	return p, nil
}

// watchMigration marks the QEMU as migrated away once an outgoing
// migration completed: the guest runs elsewhere now, and the quit that
// follows ends this launcher successfully (its pod completes, as
// KubeVirt's source pods do). A QEMU started with -incoming receives
// exactly one migration (a failed one ends QEMU), so the first completed
// migration of such a QEMU is its incoming one and every later one is
// outgoing; on any other QEMU every completed migration is outgoing.
func (p *qemuProc) watchMigration(sub *qmp.Subscription, incoming bool) {
	defer close(p.migWatched)
	for ev := range sub.Events() {
		v, err := ev.Typed()
		if m, ok := v.(*qmp.MigrationEvent); err != nil || !ok || m.Status != qmp.MigrationCompleted {
			continue
		}
		if incoming {
			incoming = false
			continue
		}
		p.migratedAway.Store(true)
	}
}

// supervise waits for QEMU to exit, stopping it gracefully on Stop, and
// records the exit.
func (s *Server) supervise(p *qemuProc, spec launchspec.Spec) {
	s.mu.Lock()
	killed := s.killed
	s.mu.Unlock()
	if killed {
		_ = p.cmd.Process.Kill()
	}
	select {
	case <-p.waited:
	case <-s.stop:
		s.gracefulStop(p, time.Duration(spec.GracePeriodSeconds)*time.Second)
	}
	<-p.waited
	p.tpm.stop()
	e := p.exit()
	s.log.Info("QEMU exited", "code", e.Code, "signal", e.Signal, "reason", e.Reason, "guestShutdown", e.GuestShutdown)
	s.writeExit(&e)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setExitedLocked(&e, "")
}

// gracefulStop: ACPI power button, grace period, quit, KillWait, SIGKILL;
// a QEMU whose guest migrated away is quit at once.
func (s *Server) gracefulStop(p *qemuProc, grace time.Duration) {
	cmdCtx := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), 5*time.Second)
	}
	if !p.migratedAway.Load() { // else no guest is left here to power off
		ctx, cancel := cmdCtx()
		err := p.mon.SystemPowerdown(ctx)
		cancel()
		s.log.Info("stopping: ACPI power-down sent", "grace", grace, "err", err)
		select {
		case <-p.waited:
			return
		case <-time.After(grace):
		}
	}
	ctx, cancel := cmdCtx()
	err := p.mon.Quit(ctx)
	cancel()
	s.log.Info("stopping: grace period over, quit sent", "err", err)
	select {
	case <-p.waited:
		return
	case <-time.After(s.cfg.KillWait):
	}
	s.log.Info("stopping: QEMU still there, SIGKILL")
	_ = p.cmd.Process.Kill()
}

// killQEMU ends everything at once (Run's context ended).
func (s *Server) killQEMU() {
	s.Stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.killed = true
	if s.qemu != nil {
		_ = s.qemu.cmd.Process.Kill()
	}
}

// exit derives the Exit once QEMU has been waited for. The monitor reaches
// EOF when QEMU is gone, which closes the event channel after every event
// QEMU sent was delivered.
func (p *qemuProc) exit() Exit {
	var last *qmp.ShutdownEvent
	timeout := time.NewTimer(2 * time.Second)
	defer timeout.Stop()
drain:
	for {
		select {
		case ev, ok := <-p.events.Events():
			if !ok {
				break drain
			}
			if ev.Name == qmp.EventReset {
				// A shutdown followed by a reset did not end the guest
				// (the agent's soft reboot without a guest agent).
				last = nil
				continue
			}
			if v, err := ev.Typed(); err == nil {
				if sd, ok := v.(*qmp.ShutdownEvent); ok {
					last = sd
				}
			}
		case <-timeout.C:
			break drain
		}
	}
	p.mon.Close()
	select { // every MIGRATION event counted
	case <-p.migWatched:
	case <-time.After(2 * time.Second):
	}
	e := Exit{At: time.Now(), Code: p.cmd.ProcessState.ExitCode()}
	if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		e.Code, e.Signal = -1, ws.Signal().String()
	}
	if last != nil {
		e.Reason = last.Reason
		e.GuestShutdown = last.Guest && last.Reason == "guest-shutdown" && e.Code == 0 && e.Signal == ""
	}
	e.MigratedAway = p.migratedAway.Load() && e.Code == 0 && e.Signal == ""
	return e
}

// writeExit writes sockets/qemu-exit.json atomically.
func (s *Server) writeExit(e *Exit) { s.writeState(launchspec.ExitFile, e) }

// writeState writes v as JSON to the file name in the sockets dir, whole
// (through a rename): the agent watches the directory for it.
func (s *Server) writeState(name string, v any) {
	path := filepath.Join(s.cfg.SocketsDir, name)
	b, _ := json.Marshal(v)
	tmp := path + ".tmp"
	err := os.WriteFile(tmp, append(b, '\n'), 0o644)
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		s.log.Error("write state file", "path", path, "err", errors.Join(err, os.Remove(tmp)))
	}
}
