// Package agent is the node agent's reconcile loop (see package node for
// the phase diagram and the reconcile model).
//
// Shape (sample-controller): three informers — VMIs labelled
// kubevirt.io/nodeName=<node>, VMIs labelled
// kubevirt.io/migrationTargetNodeName=<node> (incoming live migrations),
// launcher pods on the node (field selector spec.nodeName) — feed a typed
// rate-limited workqueue keyed by VMI UID;
// Config.Workers goroutines run sync(ctx, uid). The queue and its workers
// are the work loop the controller uses too (cluster/reconcile.Loop, with
// the agent's own nodevirt_agent_reconcile_duration_seconds as its
// observer and no controller queue metrics). The workqueue never runs
// one key on two workers at once, which serialises everything done for one
// VMI (netsetup requires it).
//
// sync = observe → plan (pure, plan.go) → apply (apply.go) → report
// (report.go, status from node/status). Actions are idempotent and every
// one that creates something persists its intent in the store first:
// the record (pod UID, sockets) before the network, the allocation (tap,
// MAC, guest IPs) before netsetup.Ensure, the launch spec before the
// launcher gets it, Intent.Stop before the power button is pressed.
//
// Effects (effects.go) go through small interfaces in Deps: Launcher,
// Network (netsetup and DHCP), QEMUDialer (QMP and guest agent),
// Processes (identity, liveness, SIGKILL of QEMU) and PodWatcher (inotify
// on the pods' sockets directories, podwatch.go, and on the way to one the
// kubelet has not made yet: the directory appearing, the launcher's socket
// and QEMU's running and exit files enqueue the VMI; the watcher loses no
// news: a full channel makes it wait, a kernel queue overflow re-arms and
// reports every pod. So a starting VMI is not polled but as a safety net:
// every 10 s while its pod's launcher socket is awaited, every 1 s once
// the launcher is there). The host implementations
// (host.go) are the defaults; node/agent/agenttest has fakes that log every
// effect in order, so sync is unit-tested on fake clientsets and a real
// store (sync_test.go) without root.
//
// The record's observed phase follows the VMI's agent-owned phase on every
// sync (recordphase.go), not only when this sync patched it.
//
// Prelaunch (prelaunch.go): a launcher pod on this node whose VMI is not
// labelled for it yet (phase Scheduling) is started as soon as its
// launcher answers: the VMI is read from the API server (the informers
// see it only once the controller labels it), the record, network, QEMU
// and QMP follow as for a Scheduled VMI, and nothing is written to the VMI
// until QEMU runs. Then the agent takes the VMI over: one status write
// from Scheduling straight to Running, with status.nodeName,
// status.activePods and the Scheduled timestamp that the controller would
// have written at Scheduled (the ownership table's takeover rows), under
// the resourceVersion read, so a controller's Scheduled that came first
// makes it conflict and the VMI is reported the usual way. The controller
// labels a taken-over VMI afterwards; until then the agent recognises it by
// status.nodeName. A VMI deleted or failed before it was taken over is an
// orphan: QEMU quit, network released.
//
// Invariants:
//   - Every call that can block (launcher, QMP, guest agent, API, netsetup)
//     runs under a context with a deadline (Config.CallTimeout, shorter for
//     status probes): a hung QEMU or launcher delays its own VMI only.
//   - The agent never stops a QEMU it did not decide to stop: Run returning
//     closes connections only. After a restart, Attach reconnects to QMP and
//     checks QEMU's identity (pid, start time, boot id) against the record;
//     preattach.go does the same attach while the informers list, so the
//     first syncs find the connections open. A domain has at most one QMP
//     connection: attach is one at a time and keeps an open connection.
//   - Status is patched only when status.Derive changes it, guarded by the
//     VMI's resourceVersion, and not again from the same resourceVersion
//     with the same status (the cache behind the agent's own write,
//     statusmemo.go); the API server's answer is not decoded
//     (statuswriter.go). The finalizer is removed last, after the final
//     status, with a JSON patch that tests the current finalizer list.
//
// Readiness (readiness.go): Agent.Ready, served as /readyz, is nil once the
// informers have listed and every record live in the store at start has
// been synced once; after a restart that is when every VM is re-adopted.
//
// Pause (pause.go) is user intent: the node API (Agent.Pause, Unpause)
// makes Record.Intent.Paused durable (the store's intent log, one
// fdatasync) before the QMP stop or cont, under the domain's opMu; the reconcile re-applies stop (ActPause) to a paused VMI
// whose QEMU runs, and never resumes a guest. The node API shares the
// domain's QMP and guest agent connections (surface.go).
//
// Soft reboot without a guest agent (reboot.go) is intent too: the node
// API's SoftReboot commits Record.Intent.Reboot, sets QEMU's shutdown
// action to pause and presses the power button; the guest's SHUTDOWN
// leaves QEMU in run state "shutdown" (no domain state: the status is left
// alone), and the reconcile (ActReboot) resets and resumes it, restores the
// action and clears the intent, or gives up at the intent's deadline
// (Config.SoftRebootTimeout). The node API also gets screenshots (QMP
// screendump into the pod's sockets dir) and guest connections dialed in
// the pod netns (surface.go).
//
// Guest filesystem freeze (freeze.go) is intent with a deadline: the node
// API's Freeze commits Record.Intent.Freeze (the thaw deadline) before
// guest-fsfreeze-freeze, under the domain's opMu, and enqueues the VMI
// for the deadline; the reconcile (ActThaw, planned by the pure
// freezePlan, which requeues at the deadline) thaws the guest and clears
// the intent once it passes, Unfreeze at once. Only a successful thaw
// clears the intent: a failed freeze brings the deadline to now, a failed
// thaw fails the sync and is retried with backoff. A restarted agent finds
// the intent in the record and thaws at the deadline, or at once when it
// passed while the agent was down. A deleted VMI's frozen guest is thawed
// before the power button; a frozen guest does not start migrating.
//
// Metrics (metricsource.go, metrics.go): MetricsSource is node/metrics'
// Source — VMs from the informer cache, statistics from the record's QEMU
// pid (/proc), its pod netns (tap counters), and the domain's QMP and guest
// agent connections, each call under the scrape's deadline. It only reads,
// except that it turns the balloon's guest-stats polling on when it finds
// it off. The agent's own metrics (reconcile and QMP latency, store size)
// go to Deps.Registerer.
//
// Live migration (migrationplan.go, migrationtarget.go,
// migrationsource.go; docs/migration.md): a VMI in the cache through the
// target label only is an incoming migration — record (role target)
// first, network, cloud-init, QEMU with -incoming defer, migrate-incoming,
// then the target's migrationState fields (field manager
// nodevirt-agent-migration-target); no phase or condition before the
// handoff. A VMI of this node whose migrationState names it the source is
// migrated through node/migration's channel once the target is ready;
// the source writes startTimestamp, endTimestamp, completed, failed,
// failureReason, mode and abortStatus (nodevirt-agent-migration-source)
// and, once completed, nothing else — unless the controller fails the
// completed migration (its target lost before it ran the guest): the VMI
// then stays on this node without the target label, and the source
// reports it Failed and quits its postmigrate QEMU, never resuming it
// (Observation.handoffRefused). Every step is persisted in
// Record.Migration before its effect; after a restart QEMU's
// query-migrate decides. The transfer mode (migrationmode.go) is PreCopy
// under KVM and Paused under TCG, whose dirty tracking loses pages of a
// running guest: the source stops the guest for the transfer, the target
// resumes it on arrival, a failed transfer resumes it on the source.
// Node-local disks (containerDisk overlays, emptyDisks) move with the
// guest (migrationdisks.go): the target exports its fresh disks on NBD,
// the source mirrors into them before the state transfer and finishes the
// mirrors at QEMU's pre-switchover pause.
//
// New work and a full store (Deps.Guard, node/storeguard): a VMI new to
// the node gets its record before anything is built for it; while the
// store's filesystem is below its free-space floor the agent creates none
// (the VMI stays Scheduled, warned NodeStoreFull, and is retried) and
// goes on serving the VMIs it has.
//
// Concurrency: the domain runtime (domain.go) is shared between the sync of
// its VMI and its watcher goroutines (QMP events, guest agent pings), which
// only update the view under its mutex and enqueue the UID.
package agent
