package agent_test

import (
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// agentProc is the agent process a test harness started; kill and stop
// reap it, and are safe to call when it is already gone.
type agentProc struct {
	mu  sync.Mutex
	cmd *exec.Cmd
}

// set records a started agent.
func (p *agentProc) set(cmd *exec.Cmd) {
	p.mu.Lock()
	p.cmd = cmd
	p.mu.Unlock()
}

func (p *agentProc) take() *exec.Cmd {
	p.mu.Lock()
	defer p.mu.Unlock()
	cmd := p.cmd
	p.cmd = nil
	return cmd
}

// kill SIGKILLs the agent and reaps it.
func (p *agentProc) kill() {
	if cmd := p.take(); cmd != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
}

// stop sends SIGTERM and reaps the agent, SIGKILLing it after 10 s.
func (p *agentProc) stop() {
	cmd := p.take()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// pid is the running agent's pid, 0 when none runs.
func (p *agentProc) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}
