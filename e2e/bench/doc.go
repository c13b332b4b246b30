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
//     ready marker on its serial console, → AgentConnected; before each VMI
//     a bare pod (one pause container) is created and its creation →
//     Running is the floor; both start on a quiet node, as the bursts do.
//   - pause:      pause/unpause cycles on that VMI: the node API's answer,
//     and until Paused=True (or its removal) is visible through the API
//     server; the floor, in the same run: QMP stop and cont through the
//     node API's QMP passthrough (no durable intent), settled the same way.
//     Then spaced cycles (-pause-spaced-cycles, -pause-gap): each call sent
//     a gap after the watch saw the one before take effect, when the node
//     is done reacting to that change; the floor spaced the same way.
//     Once more after the restart scenario, on the first of the burst's 100
//     VMIs (unpaused and booted first) with the other 99 on the node.
//   - burst:      50, then 100 VMIs (startStrategy Paused) created 100 ms
//     apart: creation → Running per VMI, and until all are Running; launcher
//     pod Running (the kubelet's report, podrunning.go) → VMI Running per
//     VMI, the agent's part under the burst; before
//     each, as many bare pods the same way (the floor), then as many
//     launcher-shaped pods (a burst VMI's launcher pod as the controller
//     renders it, without the VMI: the pod shape's share of the start), and
//     the VMIs' P50 and P95 over the bare pods'. While each of the three
//     runs, from its first creation until all are Running, the node's CPU
//     time is added up by component (cpuuse.go: every process's times from
//     /proc, once a second), so the report says what the VMIs' extra time
//     was spent on, and the API requests are counted by resource and verb
//     (apiserver_request_total of kube-apiserver, before and after;
//     apirequests.go), so it says how many writes and reads each object
//     cost the API server. Before each round, the floor of a VMI's own
//     QEMU: bare QEMU processes of the burst VMI's machine without
//     devices, each started on the host and asked query-status, all kept
//     running until the last answered, as a burst's QEMUs stay (and, for
//     comparison, a set each quit before the next starts, which reuses
//     the memory the one before freed; qemufloor.go); a VMI's CPU per
//     object is reported over a launcher-shaped pod's plus the floor,
//     next to the node's CPU per arrival (CPUs × the creation interval),
//     above which a burst queues. Each burst waits first
//     until containerd holds none of the step before's dead sandboxes (the
//     kubelet's garbage collection removes them once a minute, all at once,
//     for seconds of CPU; reap.go), then for a quiet node (every CPU under
//     15 % busy for 2 s): the kubelet tears pods down for seconds after
//     their API objects are gone, and that work must not land in the next
//     burst. The busy share of those quiet windows is the node's
//     background (the idle cluster's own work), which goes on during the
//     step: each step's CPU per object is also reported net of it (the
//     share × the CPUs × the step's window), since the VMIs' window is the
//     longest and carries the most of it. The 100 VMIs are the overhead
//     scenario's 100 and the restart scenario's (those of the last
//     round). Each burst runs -burst-rounds times (default 3), bare pods,
//     launcher-shaped pods and VMIs in each round: the floor moves from
//     round to round as much as the VMIs do, so a figure pools the rounds'
//     samples and lists each round's median, and a ratio is one value per
//     round (the report's median is theirs).
//     The agent's syncs per VMI over the VMIs' window are read from its
//     nodevirt_agent_reconcile_duration_seconds.
//   - restart:    with those VMs running, once the node is quiet (as for a
//     burst), SIGKILL the agent process: time
//     until the new agent's /readyz answers and it holds a QMP connection
//     to every VM again, and the number of VMs disturbed (QEMU replaced,
//     phase or pause state changed); the floor, in the same run: a bare
//     QMP client attaching to every VM between the SIGKILL and the new
//     process (qmpfloor.go).
//   - controller: N VMIs (default 8,000) no node can take: the controller's
//     throughput (VMI → launcher pod → Scheduling) and RSS per VMI.
//   - snapshot:   a running VM with a 1 GiB claim of the local CSI driver
//     and an ext4 file system its guest agent freezes: -snapshot-cycles
//     online VM snapshots (created → Succeeded; the freeze window from the
//     node agent's timeline), then as many restores onto it stopped
//     (created → complete); floors measured just before each: a bare CSI
//     VolumeSnapshot, the node API's freeze + unfreeze, a claim restored
//     from a VolumeSnapshot (created → Bound).
//
// The short scenarios (single, pause, virtctl, restart) run -repeat times
// (default 3): each figure is over all runs' samples, and the report lists
// each run's median, the run-to-run spread a regression must stand out of.
// The report names the launcher pod shape every VMI figure used.
//
// A benchmark is not a test: no figure fails it. Any error does: the
// command exits non-zero and the report records the error next to the
// figures gathered so far; -docs then leaves docs/benchmarks.{md,json} as
// the last complete run wrote them.
package main
