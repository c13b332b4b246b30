package agenttest

import (
	"fmt"
	"strconv"
	"sync"

	"github.com/nodevirt/nodevirt/store"
)

// BootID is the boot the fake processes live in.
const BootID = "agenttest-boot"

// Processes is a fake agent.Processes: the processes the test starts.
type Processes struct {
	log *Log

	mu    sync.Mutex
	alive map[int]uint64 // pid → start time
}

// NewProcesses returns a host with no processes.
func NewProcesses(log *Log) *Processes { return &Processes{log: log, alive: map[int]uint64{}} }

// Start makes pid a live process started at start (clock ticks).
func (p *Processes) Start(pid int, start uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.alive[pid] = start
}

// Exit makes pid gone.
func (p *Processes) Exit(pid int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.alive, pid)
}

// Identify returns the identity of the live process pid.
func (p *Processes) Identify(pid int) (store.Process, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st, ok := p.alive[pid]
	if !ok {
		return store.Process{}, fmt.Errorf("process %d: no such process", pid)
	}
	return store.Process{PID: pid, StartTime: st, BootID: BootID}, nil
}

// Alive reports whether proc is a live process (same pid, start time and
// boot).
func (p *Processes) Alive(proc store.Process) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	st, ok := p.alive[proc.PID]
	return ok && proc.PID != 0 && st == proc.StartTime && (proc.BootID == "" || proc.BootID == BootID)
}

// Kill logs "process.Kill <pid>"; unless it fails, the process proc is
// gone. A process gone already, or another one with proc's pid (a reused
// pid), is left alone and is not an error.
func (p *Processes) Kill(proc store.Process) error {
	if err := p.log.call("process.Kill " + strconv.Itoa(proc.PID)); err != nil {
		return err
	}
	if p.Alive(proc) {
		p.Exit(proc.PID)
	}
	return nil
}
