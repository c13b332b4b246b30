package testenv

import (
	"net"
	"testing"
)

// FreeLoopbackAddr returns a 127.0.0.1 address whose TCP port is free right
// now, for a server a test starts as a child process.
func FreeLoopbackAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
