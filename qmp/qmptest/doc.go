// Package qmptest provides scripted fake QMP and guest agent (QGA) servers
// on unix sockets, for unit tests of code that uses package qmp.
//
// A Server answers each command through the Handler registered for it;
// handlers can return a result, a *qmp.Error (sent as an error reply with
// its class), ErrNoReply (the server never answers, like a hung QEMU) or
// ErrHangup (the server closes the connection mid-command). Emit sends events
// to every connected QMP client. Servers shut down through t.Cleanup.
//
// A QMP server runs each command in its own goroutine, so replies can come
// out of order (as they may from QEMU with out-of-band commands). An agent
// server, like qemu-ga, runs commands one at a time, sends no greeting,
// treats the 0xFF byte as a parser reset and answers guest-sync-delimited
// with 0xFF before the reply.
//
// The qmp package's conformance test (conformance_test.go) runs the same
// checks against a scripted Server and against real QEMU, so error classes
// and event ordering in scripts match QEMU's: script events with Emit before
// returning from the handler, as QEMU sends STOP before stop's reply.
package qmptest
