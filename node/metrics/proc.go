package metrics

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/prometheus/procfs"
)

// ProcessCPU reads the CPU time of the process pid and of its vCPU threads
// (QEMU names them "CPU <n>/KVM" or "CPU <n>/TCG") from procRoot (/proc).
func ProcessCPU(procRoot string, pid int) (CPU, error) {
	fs, err := procfs.NewFS(procRoot)
	if err != nil {
		return CPU{}, fmt.Errorf("proc file system %s: %w", procRoot, err)
	}
	p, err := fs.Proc(pid)
	if err != nil {
		return CPU{}, fmt.Errorf("process %d: %w", pid, err)
	}
	st, err := p.Stat()
	if err != nil {
		return CPU{}, fmt.Errorf("process %d stat: %w", pid, err)
	}
	cpu := CPU{UsageSeconds: st.CPUTime()}
	threads, err := fs.AllThreads(pid)
	if err != nil {
		return CPU{}, fmt.Errorf("process %d threads: %w", pid, err)
	}
	for _, t := range threads {
		// A thread's stat holds its comm too: one read per thread.
		st, err := t.Stat()
		if err != nil {
			continue // the thread ended
		}
		id, ok := vcpuID(st.Comm)
		if !ok {
			continue
		}
		state := "blocked"
		if st.State == "R" {
			state = "running"
		}
		cpu.VCPUs = append(cpu.VCPUs, VCPU{ID: id, State: state, Seconds: st.CPUTime()})
	}
	return cpu, nil
}

// vcpuID returns n of a thread named "CPU n/KVM" or "CPU n/TCG".
func vcpuID(comm string) (string, bool) {
	rest, ok := strings.CutPrefix(comm, "CPU ")
	if !ok {
		return "", false
	}
	n, accel, ok := strings.Cut(rest, "/")
	if !ok || (accel != "KVM" && accel != "TCG") {
		return "", false
	}
	if _, err := strconv.Atoi(n); err != nil {
		return "", false
	}
	return n, true
}

// ProcessRSS returns the resident set size of the process pid in bytes.
func ProcessRSS(procRoot string, pid int) (int64, error) {
	path := filepath.Join(procRoot, strconv.Itoa(pid), "statm")
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", path, err)
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0, fmt.Errorf("parse %s: %q", path, b)
	}
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse %s: %w", path, err)
	}
	return pages * int64(os.Getpagesize()), nil
}
