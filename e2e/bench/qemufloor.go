package main

import (
	"context"
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

// qemuStartFloor is the physical floor of the CPU a VMI's QEMU costs the
// node: n bare QEMU processes of qemuFloorArgs, one after another, each
// started by this process, asked query-status over its QMP socket (the
// agent's first question) and told to quit. It returns the CPU time each
// one had used, all its threads, when its answer arrived: its start, not
// its exit.
func qemuStartFloor(ctx context.Context, n int) ([]time.Duration, error) {
	dir, err := os.MkdirTemp("", "nodevirt-bench-qemu-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	out := make([]time.Duration, 0, n)
	for i := range n {
		cpu, err := qemuStartOnce(ctx, filepath.Join(dir, fmt.Sprintf("qmp%d.sock", i)))
		if err != nil {
			return nil, fmt.Errorf("bare QEMU %d: %w", i, err)
		}
		out = append(out, cpu)
	}
	return out, nil
}

func qemuStartOnce(ctx context.Context, sock string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	args := append(append([]string{}, qemuFloorArgs...), "-qmp", "unix:"+sock+",server=on,wait=off")
	cmd := exec.Command("qemu-system-x86_64", args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	// A QEMU that exits on its own ends the wait for its socket. Only
	// that wait: once connected, its exit closes the connection, and a
	// QEMU that exits on quit must not cancel the reading of the answer.
	var err error
	exited := make(chan struct{})
	go func() { err = cmd.Wait(); close(exited) }()
	cpu, asked := askAndQuit(ctx, sock, cmd.Process.Pid, exited)
	if asked != nil {
		_ = cmd.Process.Kill() // our child, by its pid
	}
	select {
	case <-exited:
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		<-exited
	}
	switch {
	case asked != nil:
		return 0, fmt.Errorf("%w (stderr: %q)", asked, stderr.String())
	case err != nil:
		return 0, fmt.Errorf("exit after quit: %w (stderr: %q)", err, stderr.String())
	}
	return cpu, nil
}

// askAndQuit waits for QEMU's QMP socket, asks query-status, reads the
// CPU time process pid has used by then, and sends quit. It stops waiting
// for the socket when exited is closed.
func askAndQuit(ctx context.Context, sock string, pid int, exited <-chan struct{}) (time.Duration, error) {
	// QEMU listens once its machine is built: until then the socket is
	// missing or refuses.
	nc, err := unixsock.Dial(ctx, sock)
	for err != nil {
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("dial %s: %w", sock, err)
		case <-exited:
			return 0, fmt.Errorf("dial %s: QEMU exited: %w", sock, err)
		case <-time.After(time.Millisecond):
		}
		nc, err = unixsock.Dial(ctx, sock)
	}
	c, err := qmp.NewConn(ctx, nc, sock) // closes nc on failure
	if err != nil {
		return 0, fmt.Errorf("QMP %s: %w", sock, err)
	}
	defer c.Close()
	if _, err := c.QueryStatus(ctx); err != nil {
		return 0, fmt.Errorf("query-status: %w", err)
	}
	cpu, err := processCPUTime(pid)
	if err != nil {
		return 0, err
	}
	return cpu, c.Quit(ctx)
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
