// Command bench measures nodevirt on the local cluster (e2e/localcluster)
// against KubeVirt's published figures and writes a report: markdown for
// people (docs/benchmarks.md keeps the latest) and JSON for tools. Run it
// with `make bench` (root; the cluster is started if none runs, and
// nodevirt is deployed from deploy/).
//
// Scenarios, in the order they run (each can be selected with -only):
//
//   - overhead:   per-VM memory at 1, 20 and 100 VMs (startStrategy Paused):
//     launcher processes' RSS, QEMU's RSS minus the guest RAM it has
//     touched, the agent's RSS growth per VM, the pod's memory request; and
//     the agent's /metrics scrape time at each count. It runs first, so
//     that the agent's idle RSS, the baseline of its growth per VM, is not
//     inflated by earlier work (a Go heap returns memory slowly).
//   - single:     one VMI on an idle node: creation → Running, → the guest's
//     ready marker on its serial console, → AgentConnected.
//   - pause:      pause/unpause cycles on that VMI: the node API's answer,
//     and until Paused=True (or its removal) is visible through the API
//     server.
//   - burst:      100 VMIs (startStrategy Paused) created 100 ms apart:
//     creation → Running per VMI, and until all are Running. Its VMIs are
//     the overhead scenario's 100 and the restart scenario's.
//   - restart:    with those VMs running, SIGKILL the agent process: time
//     until the new agent holds a QMP connection to every VM again, and the
//     number of VMs disturbed (QEMU replaced, phase or pause state changed).
//   - controller: N VMIs (default 8,000) no node can take: the controller's
//     throughput (VMI → launcher pod → Scheduling) and RSS per VMI.
//
// A benchmark is not a test: no figure fails it. Any error does: the
// command exits non-zero and the report records the error next to the
// figures gathered so far.
package main
