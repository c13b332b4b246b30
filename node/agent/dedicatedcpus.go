package agent

import (
	"context"
	"fmt"
	"slices"

	"github.com/nodevirt/nodevirt/node/cpupin"
	"github.com/nodevirt/nodevirt/qmp"
	"github.com/nodevirt/nodevirt/store"
)

// cpuLister is what pinning needs of a QMP connection.
type cpuLister interface {
	QueryCPUsFast(ctx context.Context) ([]qmp.CPUInfo, error)
}

// pinDedicatedCPUs gives a VMI with dedicatedCpuPlacement its CPUs: each
// vCPU thread pinned to one CPU of the launcher container's cpuset, QEMU's
// other threads to the CPU left over (isolateEmulatorThread) or to the
// vCPUs' CPUs. It runs when the agent first attaches to a new QEMU. A
// failure is reported as a warning event and in the timeline; the guest
// keeps running unpinned.
func (a *Agent) pinDedicatedCPUs(ctx context.Context, o *Observation, proc store.Process) {
	cpu := o.VMI.Spec.Domain.CPU
	if cpu == nil || !cpu.DedicatedCPUPlacement {
		return
	}
	pins, err := a.planPins(ctx, o, proc.PID, cpu.IsolateEmulatorThread)
	if err == nil {
		err = cpupin.Apply(pins)
	}
	msg := fmt.Sprintf("%d threads of QEMU pid %d pinned", len(pins), proc.PID)
	reason := "CPUsPinned"
	if err != nil {
		reason, msg = "CPUPinningFailed", err.Error()
		a.warn(o.VMI, reason, msg)
	}
	if uerr := a.update(ctx, o, func(*store.Record) error { return nil }, a.event(reason, msg)); uerr != nil {
		a.log.Warn("record CPU pinning", "vmi", o.name(), "err", uerr)
	}
}

// planPins lists QEMU's vCPU threads (QMP) and other threads (/proc) and
// plans them onto the container's cpuset.
func (a *Agent) planPins(ctx context.Context, o *Observation, pid int, isolate bool) ([]cpupin.Pin, error) {
	conn, ok := a.domain(o.UID).qmpConn().(cpuLister)
	if !ok {
		return nil, fmt.Errorf("pin vCPUs: the QMP connection cannot list vCPUs")
	}
	cpus, err := conn.QueryCPUsFast(ctx)
	if err != nil {
		return nil, fmt.Errorf("pin vCPUs: query-cpus-fast: %w", err)
	}
	vcpus := make([]int, 0, len(cpus))
	for _, c := range cpus {
		vcpus = append(vcpus, c.ThreadID)
	}
	host := cpupin.Host{}
	threads, err := host.Threads(pid)
	if err != nil {
		return nil, fmt.Errorf("pin vCPUs: %w", err)
	}
	others := slices.DeleteFunc(threads, func(tid int) bool { return slices.Contains(vcpus, tid) })
	allowed, err := host.Allowed(pid)
	if err != nil {
		return nil, fmt.Errorf("pin vCPUs: %w", err)
	}
	return cpupin.Plan(vcpus, others, allowed, isolate)
}
