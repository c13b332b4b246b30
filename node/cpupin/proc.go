package cpupin

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Host is where the /proc and /sys/fs/cgroup of the node are mounted;
// the zero value means "/".
type Host struct {
	Root string
}

func (h Host) path(p string) string { return filepath.Join("/", h.Root, p) }

// Threads lists the thread ids of process pid.
func (h Host) Threads(pid int) ([]int, error) {
	entries, err := os.ReadDir(h.path(fmt.Sprintf("proc/%d/task", pid)))
	if err != nil {
		return nil, fmt.Errorf("threads of pid %d: %w", pid, err)
	}
	tids := make([]int, 0, len(entries))
	for _, e := range entries {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, tid)
		}
	}
	return tids, nil
}

// Allowed returns the CPUs of process pid's cpuset cgroup (cgroup v1
// cpuset.cpus, or v2 cpuset.cpus.effective), or, when that cannot be read,
// the process's Cpus_allowed_list. The cgroup is what the kubelet's CPU
// manager sets, and it stays the same after Apply narrows the threads.
func (h Host) Allowed(pid int) ([]int, error) {
	if cpus, err := h.cgroupCPUs(pid); err == nil {
		return cpus, nil
	}
	status, err := os.ReadFile(h.path(fmt.Sprintf("proc/%d/status", pid)))
	if err != nil {
		return nil, fmt.Errorf("cpus of pid %d: %w", pid, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Cpus_allowed_list:"); ok {
			return ParseList(v)
		}
	}
	return nil, fmt.Errorf("cpus of pid %d: no Cpus_allowed_list", pid)
}

func (h Host) cgroupCPUs(pid int) ([]int, error) {
	raw, err := os.ReadFile(h.path(fmt.Sprintf("proc/%d/cgroup", pid)))
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		var file string
		switch {
		case parts[0] == "0" && parts[1] == "": // cgroup v2
			file = h.path(filepath.Join("sys/fs/cgroup", parts[2], "cpuset.cpus.effective"))
		case hasController(parts[1], "cpuset"):
			file = h.path(filepath.Join("sys/fs/cgroup/cpuset", parts[2], "cpuset.cpus"))
		default:
			continue
		}
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		return ParseList(string(data))
	}
	return nil, fmt.Errorf("pid %d has no cpuset cgroup", pid)
}

func hasController(list, name string) bool {
	for _, c := range strings.Split(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// Apply applies every pin with sched_setaffinity(2).
func Apply(pins []Pin) error {
	for _, p := range pins {
		var set unix.CPUSet
		for _, c := range p.CPUs {
			set.Set(c)
		}
		if err := unix.SchedSetaffinity(p.TID, &set); err != nil {
			return fmt.Errorf("pin thread %d to cpus %v: %w", p.TID, p.CPUs, err)
		}
	}
	return nil
}
