// Package agenttest provides fakes of the node agent's effects
// (agent.Launcher, agent.Network, agent.QEMUDialer, agent.Processes) for
// unit tests of the reconcile without root, QEMU or launchers.
//
// Every fake records the effects it performs, in order, in one shared
// Log: "launcher.Launch", "network.Ensure <tap>", "network.Release <tap>",
// "dhcp.Listen <bridge>", "qmp.Dial", "qmp.Stop", "qmp.Cont",
// "qmp.SystemPowerdown", "qmp.Quit", "process.Kill <pid>". Reads
// (launcher status and pid, query-status, process checks, guest agent
// dials) are not logged. Log.FailOn makes an effect fail; Log.OnCall runs a
// check when an effect is called, before it happens: tests use it to
// assert that the agent persisted its intent first.
//
// The fakes are safe for concurrent use; their state changes only when
// the agent acts or the test says so (no guest is simulated). They obey
// the conformance suites in conformance*.go, which the host
// implementations (node/agent/host.go) pass too.
package agenttest
