package qmp_test

import (
	"bytes"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/nodevirt/nodevirt/qmp"
)

// A guest agent that sends an endless line must not make the host buffer
// it: the connection is dropped with a protocol error.
func TestAgent_OversizedMessageDropsConnection(t *testing.T) {
	host, guest := net.Pipe()
	defer guest.Close()
	a := qmp.NewAgent(host, "pipe")
	defer a.Close()

	go func() {
		chunk := bytes.Repeat([]byte("x"), 1<<20)
		for range 20 { // 20 MiB, no newline
			if _, err := guest.Write(chunk); err != nil {
				return
			}
		}
	}()
	select {
	case <-a.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("agent still connected after 20 MiB without a newline")
	}
	err := a.Err()
	if !errors.Is(err, qmp.ErrClosed) || !errors.Is(err, qmp.ErrProtocol) {
		t.Errorf("Err() = %v, want ErrClosed and ErrProtocol", err)
	}
}
