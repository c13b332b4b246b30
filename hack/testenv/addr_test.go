package testenv

import "testing"

func TestFreeLoopbackAddrNeverRepeats(t *testing.T) {
	seen := map[string]bool{}
	for range 200 {
		addr := FreeLoopbackAddr(t)
		if seen[addr] {
			t.Fatalf("FreeLoopbackAddr returned %s twice", addr)
		}
		seen[addr] = true
	}
}
