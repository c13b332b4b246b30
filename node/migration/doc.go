// Package migration is the live-migration channel between two node agents
// (docs/migration.md): QEMU's migration stream leaves the source QEMU on a
// unix socket in its launcher pod, crosses the network only inside mutual
// TLS between the agents, and enters the target QEMU on a unix socket in the
// target pod. QEMU never listens on the pod network and nothing on the wire
// is plaintext.
//
//   - Proxy (source side) listens on a unix socket QEMU's `migrate` connects
//     to (or, for a disk mirror, QEMU's NBD client); every connection QEMU
//     opens (one for the main stream, more with multifd) becomes one new
//     TLS connection to the target agent, opened with a Header naming the
//     migration UID, the stream's Kind and its number.
//   - Server (target side) accepts TLS connections whose client certificate
//     chains to the agents' trust bundle, reads the Header, asks its Targets
//     which source node and QEMU socket belong to that migration UID, and
//     serves only the certificate of that source node's agent
//     (system:nodevirt-agent:<sourceNode>); it then pipes the bytes to the
//     target QEMU's incoming socket (KindState) or its NBD server socket
//     (KindDisks).
//
// Both sides take their certificates from the agent's certrotation.Rotator
// (the agent-serving signer issues server and client auth) and the roots
// from the mounted bundle at every handshake.
//
// The package moves bytes only: it writes no status and no store record.
// The agent (node/agent) decides when a migration starts and ends and keeps
// the Targets it serves.
package migration
