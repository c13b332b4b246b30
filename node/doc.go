// Package node is the home of the node agent (nodevirt-agent) and the
// pieces it shares with the launcher in each VM's pod. Subpackages:
//
//	node/agent       the reconcile loop: informers → queue → sync(uid)
//	node/status      pure derivation of the agent's VMI status fields
//	node/podfs       the kubelet pod-dir layout as seen from the host
//	node/launchspec  the launch spec (and convert: VMI → QEMU argv)
//	node/launcher    the launcher's API: server, client, SO_PEERCRED
//	node/cloudinit   the NoCloud ISO
//	node/heartbeat   the node's kubevirt.io/heartbeat and schedulable label
//	node/deviceplugin devices.kubevirt.io/{kvm,tun,vhost-net} for launcher pods
//	node/api         the node API (pause, console/VNC, guest data; mTLS) and nodectl's routes
//	node/migration   the agents' mTLS channel carrying a live migration's streams
//	node/unixsock    unix sockets at paths longer than sun_path (kubelet pod dirs)
//
// cmd/nodevirt-agent runs the reconcile loop, the heartbeat and its
// servers side by side; if one of them stops, the process exits. The
// device plugins run in a process of their own, cmd/nodevirt-deviceplugins
// (a second container of the agent's pod), so that they outlive agent
// restarts: the kubelet takes a dead plugin's devices away at once.
//
// # Phases
//
// The controller moves a VMI to Scheduled (pod running, status.nodeName and
// the kubevirt.io/nodeName label set, finalizer added). From there the agent
// of that node owns status.phase. The agent starts the VMI's QEMU earlier,
// as soon as the launcher in a pod on its node answers (prelaunch, in
// node/agent/prelaunch.go), but writes nothing to the VMI before Scheduled:
//
//	               QEMU runs the guest
//	Scheduled ─────────────────────────────▶ Running ──┐
//	   │                                        │      │ guest powers off
//	   │ launch fails, launcher lost            │      ▼ (QEMU exit 0 after
//	   │                                        │   Succeeded  a guest SHUTDOWN)
//	   ▼                                        │
//	 Failed ◀───────────────────────────────────┘
//	          QEMU crashed/killed, launcher or pod gone
//
// Paused is not a phase: a paused VMI is Running with Paused=True and
// Ready=False. Succeeded and Failed are final. Each transition appends a
// phaseTransitionTimestamps entry and records an event (Started, Stopped).
//
// Deletion (the VMI carries kubevirt.io/foregroundDeleteVirtualMachine):
//
//	deletionTimestamp ─▶ persist Intent.Stop{Deadline: now+grace}
//	                  ─▶ QMP system_powerdown        (event ShuttingDown)
//	                  ─▶ guest powers off, or at the deadline QMP quit / SIGKILL
//	                  ─▶ release network and DHCP, mark the record gone
//	                  ─▶ patch the final status, remove the finalizer (event Deleted)
//
// # Reconcile model
//
// One key per VMI UID. Informer events (VMIs labelled with this node, launcher
// pods on this node), QMP events and QMP disconnects (QEMU exit), guest agent
// changes, files appearing in the pod's sockets directory (inotify: the
// launcher listening, QEMU running or exited) and a periodic resync all
// enqueue the same key; a starting VMI is polled only as a safety net.
// sync(uid):
//
//	observe  caches + store record + launcher status (bounded) + in-memory runtime
//	plan     pure: Observation → ordered idempotent actions (+ requeue delay)
//	apply    each action, persisting intent in the store before side effects
//	report   status.Derive (pure) and a status patch only when it changed
//
// The store record is the agent's memory; the in-memory runtime (QMP and
// guest agent connections, DHCP servers) is rebuilt after a restart by the
// same actions (EnsureNetwork, Attach), which are no-ops on what already
// exists. A sync that cannot tell the domain's state (not re-attached yet)
// reports nothing, so a restart never flaps a phase or condition.
//
// # Imports
//
// node imports the API contract (cluster/api, cluster/client) and the work
// loop library cluster/reconcile (informer keys → rate-limited queue → N
// workers → sync; shared with the controller so that both retry, log and
// shut down alike), never the controllers (cluster/vm, cluster/vmi,
// cluster/node, cluster/controller).
package node
