package main

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/procfs"
)

// cpuSampleEvery is how often the CPU meter reads every process's times.
// Each round reads /proc/<pid>/stat of every process (about 500 during a
// burst of 100 VMIs), so the meter itself costs about 2.5 % of a CPU at
// this period; a process that lives shorter than it (most runc and CNI
// plugin runs) is counted as its parent's.
const cpuSampleEvery = time.Second

// clockTicks is the unit of /proc/<pid>/stat's times (USER_HZ, 100 on
// every Linux this runs on).
const clockTicks = 100

// ticksOf is the CPU time of a process and of the children it waited
// for, in clock ticks.
func ticksOf(s procfs.ProcStat) int64 { return int64(s.UTime+s.STime) + int64(s.CUTime+s.CSTime) }

// component names the part of the node a process belongs to, by its
// command name (which the kernel cuts to 15 bytes).
func component(comm string) string {
	switch {
	case comm == "kube-apiserver", comm == "etcd", comm == "kubelet", comm == "containerd":
		return comm
	case strings.HasPrefix(comm, "containerd-shim"), strings.HasPrefix(comm, "runc"):
		return "containerd shims, runc" // runc's short runs mostly land on their shim
	case strings.HasPrefix(comm, "kube-"):
		return "scheduler, controller-manager, kube-proxy"
	case comm == "bridge", comm == "host-local", comm == "portmap", comm == "loopback":
		return "CNI plugins"
	case comm == "nodevirt-agent":
		return "nodevirt agent"
	case comm == "nodevirt-launch":
		return "nodevirt launchers"
	case comm == "nodevirt-contro":
		return "nodevirt controller"
	case strings.HasPrefix(comm, "nodevirt-"):
		return "nodevirt API server, operator, device plugin"
	case strings.HasPrefix(comm, "qemu-system"):
		return "QEMU"
	case comm == "qemu-img":
		return "qemu-img"
	case comm == "bench":
		return "this benchmark"
	case strings.HasPrefix(comm, "kworker"), strings.HasPrefix(comm, "ksoftirqd"), strings.HasPrefix(comm, "rcu_"):
		return "kernel threads"
	}
	return "other"
}

// cpuMeter adds up the CPU time the host's processes use between start
// and stop, by component. A process's time is what its times grew by
// between samples; one that started and ended between two samples is
// counted in its parent's reaped children's time, and the share of an
// ended process already counted is taken back from its parent's.
type cpuMeter struct {
	stop chan struct{}
	done chan cpuUse
}

// cpuUse is the CPU time of one window, by component and by command.
type cpuUse struct {
	wall   time.Duration
	byComp map[string]time.Duration
	byComm map[string]time.Duration
}

// startCPUMeter starts a window; off, it measures nothing (and costs
// nothing), and Stop returns an empty cpuUse.
func startCPUMeter(on bool) *cpuMeter {
	if !on {
		return nil
	}
	m := &cpuMeter{stop: make(chan struct{}), done: make(chan cpuUse, 1)}
	go m.run()
	return m
}

// Stop ends the window and returns its CPU time.
func (m *cpuMeter) Stop() cpuUse {
	if m == nil {
		return cpuUse{}
	}
	close(m.stop)
	return <-m.done
}

func (m *cpuMeter) run() {
	began := time.Now()
	ticks := map[string]int64{} // by command
	prev := readProcs()
	t := time.NewTicker(cpuSampleEvery)
	defer t.Stop()
	for stopped := false; !stopped; {
		select {
		case <-m.stop:
			stopped = true
		case <-t.C:
		}
		cur := readProcs()
		for pid, p := range cur {
			if was, ok := prev[pid]; ok && was.Starttime == p.Starttime {
				ticks[p.Comm] += ticksOf(p) - ticksOf(was)
			} else {
				ticks[p.Comm] += ticksOf(p) // born in the window
			}
		}
		for pid, was := range prev {
			if p, ok := cur[pid]; ok && p.Starttime == was.Starttime {
				continue
			}
			// Ended: its parent's reaped time now holds all of it.
			if parent, ok := cur[was.PPID]; ok {
				ticks[parent.Comm] -= ticksOf(was)
			}
		}
		prev = cur
	}
	u := cpuUse{wall: time.Since(began), byComp: map[string]time.Duration{}, byComm: map[string]time.Duration{}}
	for comm, n := range ticks {
		d := time.Duration(n) * time.Second / clockTicks
		u.byComm[comm] = d
		u.byComp[component(comm)] += d
	}
	m.done <- u
}

// readProcs reads every process's times; a process that ends while it
// is read is left out.
func readProcs() map[int]procfs.ProcStat {
	out := map[int]procfs.ProcStat{}
	procs, err := procfs.AllProcs()
	if err != nil {
		return out
	}
	for _, p := range procs {
		if s, err := p.Stat(); err == nil {
			out[p.PID] = s
		}
	}
	return out
}

// total is the window's CPU time of every component.
func (u cpuUse) total() time.Duration {
	var t time.Duration
	for _, d := range u.byComp {
		t += d
	}
	return t
}

// String lists the components by CPU time, largest first, leaving out
// those under 0.05 s.
func (u cpuUse) String() string {
	type kv struct {
		k string
		v time.Duration
	}
	var l []kv
	for k, v := range u.byComp {
		if v >= 50*time.Millisecond {
			l = append(l, kv{k, v})
		}
	}
	slices.SortFunc(l, func(a, b kv) int { return cmp.Or(cmp.Compare(b.v, a.v), cmp.Compare(a.k, b.k)) })
	parts := make([]string, len(l))
	for i, e := range l {
		parts[i] = fmt.Sprintf("%s %.1f", e.k, e.v.Seconds())
	}
	return strings.Join(parts, ", ")
}
