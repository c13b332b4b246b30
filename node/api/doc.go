// Package api is the node agent's HTTP API: virt-handler's per-VMI
// routes for the cluster side, and a debug surface for nodectl.
//
// Two listeners, one handler tree each:
//
//	unix socket (root only, mode 0600)    Public routes + Debug routes
//	TLS port (mutual TLS, nodevirt-api)   Public routes only (tls.go)
//
// Public routes (virt-handler's shapes, {ns}/{name} of the VMI):
//
//	PUT /v1/namespaces/{ns}/virtualmachineinstances/{name}/pause
//	PUT .../unpause  .../softreboot  .../reset  .../freeze  .../unfreeze
//	GET .../guestosinfo  .../userlist  .../filesystemlist
//	GET .../console  .../vnc         websockets (subprotocol plain.kubevirt.io)
//	GET .../vnc/screenshot[?moveCursor=true]   image/png
//	GET .../portforward/{port}[/{protocol}]    websocket ↔ guest port (tcp|udp)
//
// Debug routes, under /nodectl/v1/; each but domains takes the VMI as the
// query parameter vmi=<ns/name or UID> (a name finds the live record first,
// else the newest tombstone):
//
//	GET  domains            every record (tombstones too)
//	GET  domain             one record
//	GET  timeline           its lifecycle timeline
//	PUT  pause, unpause
//	POST qmp                body {"execute": ..., "arguments": ...} → {"return": ...}
//	POST agent              the same, to the guest agent
//	GET  console            websocket, as above
//
// Errors are JSON {"error": "..."} with 400 for a bad port or protocol
// (naming it), a VMI without a graphics device or pod network address, 404
// for an unknown VMI, 409 for a VMI that is not running, is paused, has no
// guest agent or a soft reboot under way, or is migrating (freeze), 502 for a QEMU, guest agent or
// guest connection error, 504 when the guest ignored a soft reboot's power
// button. softreboot without a guest agent waits for the guest's shutdown
// (Config.SoftRebootTimeout bounds the request).
//
// Streams: QEMU's serial chardev takes one client at a time, so a new
// console (or VNC) session for a VMI closes the previous one first; any
// number of port-forwards may be open (for udp one message = one datagram). The
// server pings every stream (Config.PingPeriod) so idle sessions survive
// proxies; a peer that does not answer within two periods is dropped.
//
// Freeze: PUT .../freeze takes an optional body {"unfreezeTimeout":
// "<duration>"} (absent: DefaultUnfreezeTimeout, 5 minutes as in KubeVirt;
// not positive or above MaxUnfreezeTimeout: 400 naming unfreezeTimeout).
// The agent's Freeze persists the thaw deadline before the guest agent
// freezes anything and thaws the guest when it passes, also after its own
// restart; unfreeze thaws now.
//
// The package knows nothing of the reconcile loop: the agent provides
// Domains, the store provides Records.
package api
