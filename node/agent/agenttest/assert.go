package agenttest

import "github.com/nodevirt/nodevirt/node/agent"

// The fakes implement the agent's interfaces.
var (
	_ agent.Launcher    = (*Launcher)(nil)
	_ agent.Network     = (*Network)(nil)
	_ agent.QEMUDialer  = (*QEMU)(nil)
	_ agent.MonitorConn = (*Monitor)(nil)
	_ agent.Processes   = (*Processes)(nil)
)
