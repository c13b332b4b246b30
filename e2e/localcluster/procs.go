package localcluster

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/procfs"
)

// Process is one host process of a pod.
type Process struct {
	PID  int
	Comm string
}

// PodProcesses lists the host processes in the cgroup of the pod with the
// given UID (the kubelet's cgroupfs layout: .../pod<uid>/<container>, with
// the systemd driver's underscores too). Zombies are left out.
func PodProcesses(podUID string) ([]Process, error) {
	keys := [][]byte{[]byte("/pod" + podUID + "/"), []byte("/pod" + strings.ReplaceAll(podUID, "-", "_"))}
	dirs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		return nil, err
	}
	var out []Process
	for _, d := range dirs {
		cg, err := os.ReadFile(filepath.Join(d, "cgroup"))
		if err != nil {
			continue // gone meanwhile
		}
		if !bytes.Contains(cg, keys[0]) && !bytes.Contains(cg, keys[1]) {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		p, err := procfs.NewProc(pid)
		if err != nil {
			continue // gone meanwhile
		}
		st, err := p.Stat()
		if err != nil || st.State == "Z" {
			continue // gone meanwhile, or a zombie
		}
		out = append(out, Process{PID: pid, Comm: st.Comm})
	}
	return out, nil
}

// ProcessAlive reports whether process pid exists and has not exited: a
// zombie (exited, not yet reaped by its parent) counts as gone.
func ProcessAlive(pid int) bool {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return false
	}
	st, err := p.Stat()
	return err == nil && st.State != "Z"
}

// PodProcess returns the pid of the process named comm in pod uid.
func PodProcess(podUID, comm string) (int, error) {
	ps, err := PodProcesses(podUID)
	if err != nil {
		return 0, err
	}
	for _, p := range ps {
		if p.Comm == comm {
			return p.PID, nil
		}
	}
	return 0, fmt.Errorf("pod %s: no process %q", podUID, comm)
}

// PodQEMU returns the pid of the QEMU process of launcher pod uid.
func PodQEMU(podUID string) (int, error) {
	ps, err := PodProcesses(podUID)
	if err != nil {
		return 0, err
	}
	for _, p := range ps {
		if strings.HasPrefix(p.Comm, "qemu-system") {
			return p.PID, nil
		}
	}
	return 0, fmt.Errorf("pod %s: no QEMU process", podUID)
}

// SIGKILL sends SIGKILL to host process pid of pod uid and waits up to
// timeout until it is gone from the pod (reaped or a zombie).
func SIGKILL(podUID string, pid int, timeout time.Duration) error {
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("SIGKILL pid %d of pod %s: %w", pid, podUID, err)
	}
	deadline := time.Now().Add(timeout)
	for {
		ps, err := PodProcesses(podUID)
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(ps, func(p Process) bool { return p.PID == pid }) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pid %d of pod %s still there %v after SIGKILL", pid, podUID, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
