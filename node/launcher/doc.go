// Package launcher is the launcher side of a VM's pod and the agent's
// client for it (docs/launcher-pod.md).
//
// The launcher serves HTTP over the unix socket sockets/launcher.sock:
//
//	GET /v1/status  -> Status
//	PUT /v1/launch  <- launchspec.Spec (sealed) -> Status
//
// Server runs in `nodevirt-launcher run`: it waits for a spec, prepares the
// disks the spec lists (containerDisk overlays through
// /proc/<holder pid>/root, emptyDisk images, a filesystem-mode PVC's
// disk.img when absent, never touched when present; a block-mode PVC's
// device checked), starts swtpm when the spec has a TPM (a child like
// QEMU, with PR_SET_PDEATHSIG; it ends when QEMU closes its control
// connection), starts QEMU as its child,
// writes sockets/qemu-running.json (its Status) once QEMU runs (the agent
// watches the directory instead of polling), and when QEMU exits writes
// sockets/qemu-exit.json (an Exit), answers for
// a little longer and returns, so the binary exits with QEMU's outcome:
// 0 after a guest shutdown or after the guest migrated away (an outgoing
// live migration completed, leaving QEMU in postmigrate, before QEMU
// exited 0: the source pod completes), 1 otherwise.
//
// # Guest shutdown versus crash
//
// The launcher gives QEMU a private QMP monitor on a socketpair (fd 3 in
// QEMU; "-chardev socket,id=launcher-mon,fd=3 -mon ...", appended to the
// spec's argv), so it never competes with the agent for qmp.sock. It
// records QEMU's SHUTDOWN events. The spec runs QEMU without -no-shutdown:
// a guest power-off makes QEMU emit SHUTDOWN {guest:true,
// reason:"guest-shutdown"} and exit 0; that pair is a guest shutdown.
// Anything else (a signal, a non-zero status, a host-side quit, no event)
// is not. The agent, holding qmp.sock, sees the same SHUTDOWN event before
// QEMU exits.
//
// # Stopping
//
// On SIGTERM (Server.Stop) with QEMU running the launcher presses the ACPI
// power button (system_powerdown), waits the spec's grace period for QEMU
// to exit, then sends quit, waits a few seconds more, then SIGKILLs QEMU.
// Without QEMU it returns at once. QEMU gets PR_SET_PDEATHSIG SIGKILL: it
// never outlives a crashed launcher.
//
// Concurrency: Server's methods are safe for concurrent use; Client is safe
// for concurrent use and holds no connection between calls.
package launcher
