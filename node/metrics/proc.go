package metrics

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// userHZ is the unit of the times in /proc/<pid>/stat (USER_HZ, 100 on
// every Linux ABI the agent runs on).
const userHZ = 100

// ProcessCPU reads the CPU time of the process pid and of its vCPU threads
// (QEMU names them "CPU <n>/KVM" or "CPU <n>/TCG") from procRoot (/proc).
func ProcessCPU(procRoot string, pid int) (CPU, error) {
	dir := filepath.Join(procRoot, strconv.Itoa(pid))
	st, err := readStat(filepath.Join(dir, "stat"))
	if err != nil {
		return CPU{}, err
	}
	cpu := CPU{UsageSeconds: st.seconds}
	tasks, err := os.ReadDir(filepath.Join(dir, "task"))
	if err != nil {
		return CPU{}, fmt.Errorf("process %d threads: %w", pid, err)
	}
	for _, t := range tasks {
		// A thread's stat holds its comm too: one read per thread.
		st, err := readStat(filepath.Join(dir, "task", t.Name(), "stat"))
		if err != nil {
			continue // the thread ended
		}
		id, ok := vcpuID(st.comm)
		if !ok {
			continue
		}
		state := "blocked"
		if st.state == "R" {
			state = "running"
		}
		cpu.VCPUs = append(cpu.VCPUs, VCPU{ID: id, State: state, Seconds: st.seconds})
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

// stat is what ProcessCPU takes from a /proc stat file.
type stat struct {
	comm    string  // field 2, without its parentheses
	state   string  // field 3
	seconds float64 // utime+stime (fields 14 and 15)
}

// readStat reads a /proc/<pid>/stat or /proc/<pid>/task/<tid>/stat file.
func readStat(path string) (stat, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return stat{}, fmt.Errorf("read %s: %w", path, err)
	}
	return parseStat(path, b)
}

// parseStat parses the stat file at path, whose content is b. It is pure.
func parseStat(path string, b []byte) (stat, error) {
	// comm (field 2) may hold spaces and parentheses: it runs from the
	// first '(' to the last ')'.
	open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return stat{}, fmt.Errorf("parse %s: no comm", path)
	}
	f := strings.Fields(string(b[end+1:]))
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return stat{}, fmt.Errorf("parse %s: %d fields", path, len(f))
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	stm, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return stat{}, fmt.Errorf("parse %s: utime %q stime %q", path, f[11], f[12])
	}
	return stat{comm: string(b[open+1 : end]), state: f[0], seconds: float64(ut+stm) / userHZ}, nil
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
