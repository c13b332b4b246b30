// Package node is the node heartbeat controller. Each node agent stamps its
// Node with the annotation kubevirt.io/heartbeat (RFC 3339) and the label
// kubevirt.io/schedulable=true. When the heartbeat is older than the
// configured threshold (default 5 min) the controller sets
// kubevirt.io/schedulable=false, so no new launcher pod lands there, and
// fails that node's VMIs (phase Failed, status.reason NodeUnresponsive) once
// their launcher pods are gone or the node is NotReady: nobody else can, the
// agent that owns their phase is silent.
//
// A heartbeat's age is the younger of its own and the time since this
// controller first saw it: a controller that just started, or whose API
// server was away (the agents could not heartbeat either), gives every
// agent a full threshold to be heard again before calling it silent.
//
// A node without a heartbeat annotation never ran an agent and is left
// alone. The controller never sets schedulable=true: the agent does when it
// is back. A stale node is looked at again every recheck interval; a fresh
// one right after its heartbeat would go stale.
//
// Plan is pure and table-tested; Controller.Sync observes (node, VMIs
// labelled kubevirt.io/nodeName=<node>, launcher pods), plans and applies.
package node
