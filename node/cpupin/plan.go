package cpupin

import (
	"errors"
	"fmt"
)

// Pin is one thread's affinity: thread id and the CPUs it may run on.
type Pin struct {
	TID  int
	CPUs []int
}

// ErrTooFewCPUs is returned by Plan when the cpuset cannot give every vCPU
// (and the emulator threads, when isolated) a CPU of its own.
var ErrTooFewCPUs = errors.New("too few dedicated CPUs")

// Plan pins vCPU thread i to allowed[i]. With isolateEmulator the other
// threads get the next CPU, allowed[len(vcpus)], to themselves; without it
// they may run on any of the vCPUs' CPUs. allowed must be sorted (as
// ParseList returns it); others must not contain vCPU threads.
func Plan(vcpus, others, allowed []int, isolateEmulator bool) ([]Pin, error) {
	need := len(vcpus)
	if isolateEmulator {
		need++
	}
	if len(vcpus) == 0 {
		return nil, errors.New("no vCPU threads to pin")
	}
	if len(allowed) < need {
		return nil, fmt.Errorf("%w: the container's cpuset has %d CPU(s) %v, the VMI needs %d (is the kubelet's CPU manager policy static and the pod Guaranteed?)",
			ErrTooFewCPUs, len(allowed), allowed, need)
	}
	pins := make([]Pin, 0, len(vcpus)+len(others))
	for i, tid := range vcpus {
		pins = append(pins, Pin{TID: tid, CPUs: []int{allowed[i]}})
	}
	emulator := append([]int(nil), allowed[:len(vcpus)]...)
	if isolateEmulator {
		emulator = []int{allowed[len(vcpus)]}
	}
	for _, tid := range others {
		pins = append(pins, Pin{TID: tid, CPUs: emulator})
	}
	return pins, nil
}
