package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/nodevirt/nodevirt/node/metrics"
	"github.com/nodevirt/nodevirt/node/unixsock"
	"github.com/nodevirt/nodevirt/qmp"
)

// qemuFloorStarts is how many bare QEMU processes a burst round starts to
// measure the floor of a VMI's own QEMU.
const qemuFloorStarts = 10

// qemuFloorArgs is the burst VMI's machine without its devices: the part
// of its QEMU command line (node/launchspec/convert) that no VMI can do
// without, stopped (-S) as the paused VMIs are.
var qemuFloorArgs = []string{
	"-nodefaults", "-no-user-config", "-display", "none", "-S",
	"-machine", "q35", "-accel", "tcg,tb-size=64", "-cpu", "max",
	"-smp", "1", "-m", "64M",
}

// qemuStartTimeout bounds one bare QEMU's start, and its quit.
const qemuStartTimeout = 30 * time.Second

// qemuStartFloor is the physical floor of the CPU a VMI's QEMU costs the
// node: n bare QEMU processes of qemuFloorArgs, one after another, each
// started by this process and asked query-status over its QMP socket (the
// agent's first question). It returns the CPU time each one had used, all
// its threads, when its answer arrived: its start, not its exit.
//
// With hold, every QEMU keeps running until the last one answered and
// they are told to quit together, as a burst's QEMUs all stay: each
// start then faults in memory no QEMU used just before. Without it, each
// is told to quit before the next starts, which then reuses the pages the
// one before freed; the two differ by what the kernel's first touch of
// fresh memory costs on this host.
func qemuStartFloor(ctx context.Context, n int, hold bool) (_ []time.Duration, err error) {
	dir, err := os.MkdirTemp("", "nodevirt-bench-qemu-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	var held []*bareQEMU
	defer func() {
		for _, q := range held {
			if qerr := q.quit(ctx); qerr != nil && err == nil {
				err = fmt.Errorf("bare QEMU %d: %w", q.index, qerr)
			}
		}
	}()
	out := make([]time.Duration, 0, n)
	for i := range n {
		q, err := startBareQEMU(ctx, i, filepath.Join(dir, fmt.Sprintf("qmp%d.sock", i)))
		if err != nil {
			return nil, fmt.Errorf("bare QEMU %d: %w", i, err)
		}
		out = append(out, q.cpu)
		if hold {
			held = append(held, q)
			continue
		}
		if err := q.quit(ctx); err != nil {
			return nil, fmt.Errorf("bare QEMU %d: %w", i, err)
		}
	}
	return out, nil
}

// bareQEMU is one started QEMU of qemuFloorArgs that answered.
type bareQEMU struct {
	index  int
	cmd    *exec.Cmd
	conn   *qmp.Conn
	stderr *strings.Builder
	exited chan struct{} // closed once cmd is reaped; waitErr is set then
	// waitErr is cmd.Wait's error.
	waitErr error
	// cpu is the CPU time it had used when its query-status answer arrived.
	cpu time.Duration
}

// startBareQEMU starts QEMU with its QMP socket at sock, waits for the
// socket and asks query-status. A QEMU that fails is killed and reaped.
func startBareQEMU(ctx context.Context, index int, sock string) (*bareQEMU, error) {
	ctx, cancel := context.WithTimeout(ctx, qemuStartTimeout)
	defer cancel()
	args := append(append([]string{}, qemuFloorArgs...), "-qmp", "unix:"+sock+",server=on,wait=off")
	q := &bareQEMU{index: index, cmd: exec.Command("qemu-system-x86_64", args...), stderr: &strings.Builder{}, exited: make(chan struct{})}
	q.cmd.Stderr = q.stderr
	if err := q.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { q.waitErr = q.cmd.Wait(); close(q.exited) }()
	if err := q.ask(ctx, sock); err != nil {
		q.kill()
		return nil, fmt.Errorf("%w (stderr: %q)", err, q.stderr.String())
	}
	return q, nil
}

// ask waits for the QMP socket, connects, asks query-status and reads
// the CPU time used by then. A QEMU that exits on its own ends the wait
// for its socket. Only that wait: once connected, its exit closes the
// connection, and a QEMU that exits on quit must not cancel the reading
// of the answer (quit).
func (q *bareQEMU) ask(ctx context.Context, sock string) error {
	// QEMU listens once its machine is built: until then the socket is
	// missing or refuses.
	nc, err := unixsock.Dial(ctx, sock)
	for err != nil {
		select {
		case <-ctx.Done():
			return fmt.Errorf("dial %s: %w", sock, err)
		case <-q.exited:
			return fmt.Errorf("dial %s: QEMU exited: %w", sock, err)
		case <-time.After(time.Millisecond):
		}
		nc, err = unixsock.Dial(ctx, sock)
	}
	if q.conn, err = qmp.NewConn(ctx, nc, sock); err != nil { // closes nc on failure
		return fmt.Errorf("QMP %s: %w", sock, err)
	}
	if _, err := q.conn.QueryStatus(ctx); err != nil {
		return fmt.Errorf("query-status: %w", err)
	}
	q.cpu, err = processCPUTime(q.cmd.Process.Pid)
	return err
}

// quit tells QEMU to quit and reaps it; one that does not exit in time is
// killed.
func (q *bareQEMU) quit(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, qemuStartTimeout)
	defer cancel()
	err := q.conn.Quit(ctx) // QEMU closing the connection as it exits is success
	_ = q.conn.Close()
	select {
	case <-q.exited:
	case <-ctx.Done():
		q.kill()
		return fmt.Errorf("no exit after quit: %w (stderr: %q)", errors.Join(err, ctx.Err()), q.stderr.String())
	}
	if err == nil && q.waitErr != nil {
		err = fmt.Errorf("exit after quit: %w", q.waitErr)
	}
	if err != nil {
		return fmt.Errorf("%w (stderr: %q)", err, q.stderr.String())
	}
	return nil
}

// kill kills the QEMU (this process's child, by its pid) and reaps it.
func (q *bareQEMU) kill() {
	if q.conn != nil {
		_ = q.conn.Close()
	}
	_ = q.cmd.Process.Kill()
	<-q.exited
}

// processCPUTime is the CPU time all threads of process pid have used,
// in /proc's clock ticks, as the CPU meter (cpuuse.go) counts the bursts':
// a floor measured another way would not compare.
func processCPUTime(pid int) (time.Duration, error) {
	cpu, err := metrics.ProcessCPU("/proc", pid)
	if err != nil {
		return 0, err
	}
	return time.Duration(cpu.UsageSeconds * float64(time.Second)).Round(time.Millisecond), nil
}
