package testenv

import (
	"net"
	"sync"
	"testing"
)

// handedOut holds the addresses FreeLoopbackAddr returned in this process.
// The kernel may give a just-closed port to the next bind of port 0, so two
// calls in a row could otherwise return the same address for two servers of
// one test (seen in CI: the agent's metrics and mTLS listeners collided).
var handedOut = struct {
	sync.Mutex
	addrs map[string]bool
}{addrs: map[string]bool{}}

// FreeLoopbackAddr returns a 127.0.0.1 address whose TCP port is free right
// now and that no earlier call in this process returned, for a server a test
// starts as a child process.
func FreeLoopbackAddr(t testing.TB) string {
	t.Helper()
	handedOut.Lock()
	defer handedOut.Unlock()
	// Listeners on ports already handed out stay open until a new port is
	// found, so the kernel cannot pick them again.
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	for range 64 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
		if addr := l.Addr().String(); !handedOut.addrs[addr] {
			handedOut.addrs[addr] = true
			return addr
		}
	}
	t.Fatal("testenv: no loopback port that was not handed out before")
	return ""
}
