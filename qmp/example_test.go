package qmp_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nodevirt/nodevirt/qmp"
)

// Pause a VM and wait for QEMU to confirm it, never waiting longer than 5 s
// on a QEMU that stopped answering.
func ExampleDial() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := qmp.Dial(ctx, "/run/vm/qmp.sock")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()

	events := c.Subscribe(16, qmp.EventStop)
	defer events.Close()
	if err := c.Stop(ctx); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			fmt.Println("QEMU is hung")
		}
		return
	}
	select {
	case <-events.Events():
		fmt.Println("paused")
	case <-ctx.Done():
	}
}

// React to guest-initiated shutdowns; a slow consumer loses events (counted)
// instead of blocking the connection.
func ExampleConn_Subscribe() {
	var c *qmp.Conn // from qmp.Dial
	sub := c.Subscribe(64, qmp.EventShutdown, qmp.EventReset)
	for e := range sub.Events() {
		v, err := e.Typed()
		if err != nil {
			continue
		}
		switch ev := v.(type) {
		case *qmp.ShutdownEvent:
			fmt.Println("shutdown, by guest:", ev.Guest, ev.Reason)
		case *qmp.ResetEvent:
			fmt.Println("reset, by guest:", ev.Guest)
		}
	}
	fmt.Println("connection ended; events lost:", sub.Dropped())
}

// Read the guest's uptime through the guest agent.
func ExampleAgent_Run() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, err := qmp.DialAgent(ctx, "/run/vm/qga.sock")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer a.Close()
	st, err := a.Run(ctx, "/bin/cat", "/proc/uptime")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s", st.OutData)
}
