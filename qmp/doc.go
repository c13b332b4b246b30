// Package qmp is a client for QEMU's machine protocol (QMP) and for the
// QEMU guest agent (QGA), built so that a hung or vanished QEMU can never
// hang its caller.
//
// # Conn (QMP)
//
// Dial connects to a QMP unix socket, reads the greeting and negotiates
// capabilities. Conn.Execute and the typed commands (QueryStatus, Stop,
// Cont, Migrate, ...) may be called from any number of goroutines: every
// request carries an id and one reader goroutine routes each reply to its
// caller, so slow commands do not queue fast ones behind them.
//
// Invariants:
//   - Every call takes a context and returns as soon as it ends, with the
//     context's error (errors.Is(err, context.DeadlineExceeded)). The command
//     may still run in QEMU; its late reply is dropped.
//   - Close (or QEMU going away) makes every pending and later call return an
//     error wrapping ErrClosed; Done and Err report it.
//   - Events never block command traffic. Each Subscription has its own
//     buffered channel; when it is full the event is dropped and counted
//     (Subscription.Dropped). Subscribers that must not miss a state change
//     should re-query state (QueryStatus) after a drop.
//   - Error replies are *Error with QEMU's class preserved; use errors.As
//     or IsClass, never the text. Dial failures wrap ErrGreeting.
//
// # Agent (QGA)
//
// DialAgent connects to the host end of the guest agent's virtio-serial
// chardev. qemu-ga sends no greeting, has no request ids and runs one command
// at a time, so an Agent serialises callers and re-synchronises with
// guest-sync-delimited (a random id, preceded by the 0xFF byte that resets
// qemu-ga's parser; everything up to the matching reply is discarded) before
// its first command and after any call that may have left a stale reply in
// the stream: a cancelled or timed-out call, a garbled reply, a guest
// reboot. The connection to the chardev outlives guest reboots and
// migrations of the agent process, so one Agent survives them; commands
// simply time out (per their context) while qemu-ga is not running.
// The guest is untrusted: messages are bounded in size.
//
// # Why not github.com/digitalocean/go-qemu
//
// go-qemu's SocketMonitor was evaluated and not used. It cannot give the
// guarantees above: its Run takes no context and sends commands one at a
// time under a mutex without reply ids, so a QEMU that stops answering
// blocks every caller forever; its Events channel is unbuffered and fed by
// the reader goroutine that also reads replies, so an undrained subscriber
// stalls all commands; its generated qmp/raw types predate QEMU 7.2 (no
// query-cpus-fast, obsolete migrate arguments); and it has no guest agent
// client. The transport here is small (newline-delimited JSON on a unix
// socket) and owns those guarantees itself; command and reply types are
// written from the QAPI schema of QEMU 7.2.
//
// Package qmptest provides scripted fake QMP and QGA servers for unit tests
// of code that uses this package. This package imports nothing else of
// nodevirt.
package qmp
