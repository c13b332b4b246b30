// Package heartbeat tells the cluster that a node's agent is alive: on an
// interval it patches the node with label kubevirt.io/schedulable=true and
// annotation kubevirt.io/heartbeat=<now, RFC 3339>. The controller treats a
// stale heartbeat as an unresponsive node, and launcher pods select
// schedulable=true nodes.
//
// Invariants:
//   - Only those two keys, and the node-fact labels Config.Labels returns
//     (the agent's cpumanager=true|false), are ever written, with a JSON
//     merge patch: other labels and annotations, and other writers of the
//     node, are untouched.
//   - A clean stop (ctx cancelled) sends one last patch with
//     schedulable=false, bounded by Config.StopTimeout, so no new VM is
//     scheduled to a node whose agent is going away. A crashed agent sends
//     nothing; the controller's staleness threshold covers that case.
//   - While Config.Refusing gives a reason (the agent's store is full,
//     node/storeguard) a beat keeps the heartbeat fresh but says
//     schedulable=false: the agent is alive and serves its VMs, and no new
//     one is scheduled to it.
//   - A failed patch is logged and retried on the next tick; Run does not
//     give up while ctx lives.
//
// What to patch is the pure function Patch, table-tested; Run only adds the
// clock and the API call.
package heartbeat
