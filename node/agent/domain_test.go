package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/nodevirt/nodevirt/hack/testenv"
	"github.com/nodevirt/nodevirt/qmp"
	"github.com/nodevirt/nodevirt/qmp/qmptest"
)

// newTestDomain returns a domain whose enqueue calls are counted on a channel.
func newTestDomain() (*domain, <-chan string) {
	ch := make(chan string, 64)
	d := &domain{uid: "u1", enqueue: func(uid string) { ch <- uid }, log: discardLogger(),
		qemu: HostQEMU{}, procs: HostProcesses{}, net: HostNetwork{}}
	return d, ch
}

func waitView(t *testing.T, d *domain, what string, ok func(RuntimeView) bool) {
	t.Helper()
	testenv.Eventually(t, 5*time.Second, what, func() error {
		if v := d.view(); !ok(v) {
			return fmt.Errorf("view %+v", v)
		}
		return nil
	})
}

func TestDomain_AttachFollowsRunState(t *testing.T) {
	srv := qmptest.NewServer(t)
	srv.Handle("query-status", func(qmptest.Request) (any, error) {
		return qmp.StatusInfo{Running: true, Status: "running"}, nil
	})
	ga := qmptest.NewAgentServer(t)
	ga.Handle("guest-get-osinfo", func(qmptest.Request) (any, error) {
		return map[string]string{"name": "Busybox", "kernel-release": "6.1"}, nil
	})
	d, enq := newTestDomain()
	defer d.close()
	proc, dialed, err := d.attach(context.Background(), srv.Path(), ga.Path())
	if err != nil || !dialed {
		t.Fatalf("attach: dialed %v, err %v", dialed, err)
	}
	// The fake server runs in this process: SO_PEERCRED names us.
	if proc.PID != os.Getpid() || proc.StartTime == 0 {
		t.Errorf("attach process = %+v, want this process", proc)
	}
	if v := d.view(); !v.QMPConnected || v.RunState != "running" {
		t.Errorf("after attach view = %+v, want connected and running", v)
	}
	waitView(t, d, "the guest agent", func(v RuntimeView) bool { return v.AgentConnected && v.AgentProbed })
	if got := d.guestOSInfo(); got.Name != "Busybox" || got.KernelRelease != "6.1" {
		t.Errorf("guestOSInfo = %+v", got)
	}

	srv.Emit("STOP", nil)
	waitView(t, d, "paused", func(v RuntimeView) bool { return v.RunState == "paused" })
	srv.Emit("RESUME", nil)
	waitView(t, d, "running", func(v RuntimeView) bool { return v.RunState == "running" })
	// A guest power-off held by shutdown action pause (soft reboot):
	// QEMU sends SHUTDOWN, then STOP; the run state stays "shutdown".
	srv.Emit("SHUTDOWN", map[string]any{"guest": true, "reason": "guest-shutdown"})
	srv.Emit("STOP", nil)
	srv.Emit("RESUME", nil)
	waitView(t, d, "running after the held shutdown", func(v RuntimeView) bool { return v.RunState == "running" })
	srv.Emit("SHUTDOWN", map[string]any{"guest": true, "reason": "guest-shutdown"})
	srv.Emit("STOP", nil)
	time.Sleep(100 * time.Millisecond)
	waitView(t, d, "shutdown, not paused", func(v RuntimeView) bool { return v.RunState == "shutdown" })

	srv.Close() // QEMU goes away
	waitView(t, d, "disconnect", func(v RuntimeView) bool { return !v.QMPConnected })
	select {
	case uid := <-enq:
		if uid != "u1" {
			t.Errorf("enqueued %q, want u1", uid)
		}
	default:
		t.Error("nothing was enqueued")
	}
}

// A guest whose vCPUs are stopped cannot answer its qemu-ga: attaching to
// a QEMU started paused (prelaunch) dials no guest agent, and
// AgentConnected stays what the status says (not probed); the guest's
// first run (RESUME) has it probed at once.
func TestDomain_NoGuestAgentProbeWhileHalted(t *testing.T) {
	srv := qmptest.NewServer(t)
	srv.Handle("query-status", func(qmptest.Request) (any, error) {
		return qmp.StatusInfo{Status: "prelaunch"}, nil
	})
	ga := qmptest.NewAgentServer(t)
	ga.Handle("guest-get-osinfo", func(qmptest.Request) (any, error) {
		return map[string]string{"name": "Busybox"}, nil
	})
	d, _ := newTestDomain()
	defer d.close()
	if _, _, err := d.attach(context.Background(), srv.Path(), ga.Path()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // the watcher's first probe is due at once
	if got := ga.Received(); len(got) != 0 {
		t.Fatalf("guest agent of a guest started paused got %d requests: %+v", len(got), got)
	}
	if v := d.view(); v.AgentProbed || v.AgentConnected {
		t.Fatalf("view %+v: want the guest agent not probed", v)
	}
	srv.Emit("RESUME", nil)
	waitView(t, d, "the guest agent probed after RESUME", func(v RuntimeView) bool { return v.AgentConnected && v.AgentProbed })
}

func TestDomain_AttachFailsOnDeadSocket(t *testing.T) {
	d, _ := newTestDomain()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, _, err := d.attach(ctx, "/nonexistent/qmp.sock", "/nonexistent/qga.sock"); err == nil {
		t.Fatal("attach to a missing socket succeeded")
	}
	if d.view().QMPConnected {
		t.Error("view says connected after a failed attach")
	}
}

// An attach to a domain attached already (preattach.go, then the sync)
// keeps the connection: QEMU serves one QMP client, a second dial would
// wait for the first to end.
func TestDomain_AttachOncePerConnection(t *testing.T) {
	srv := qmptest.NewServer(t)
	srv.Handle("query-status", func(qmptest.Request) (any, error) {
		return qmp.StatusInfo{Status: "paused"}, nil
	})
	d, _ := newTestDomain()
	defer d.close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	first, dialed, err := d.attach(ctx, srv.Path(), "/nonexistent/qga.sock")
	if err != nil || !dialed {
		t.Fatalf("first attach: dialed %v, err %v", dialed, err)
	}
	again, dialed, err := d.attach(ctx, srv.Path(), "/nonexistent/qga.sock")
	if err != nil || dialed || again != first {
		t.Fatalf("second attach = %+v, dialed %v, err %v; want %+v from the open connection", again, dialed, err, first)
	}
	n := 0
	for _, r := range srv.Received() {
		if r.Command == "query-status" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("QEMU asked query-status %d times, want 1 (one connection)", n)
	}
}

// A domain closed while attach dialed (released, or the agent stopping)
// keeps no connection.
func TestDomain_AttachAfterCloseKeepsNothing(t *testing.T) {
	srv := qmptest.NewServer(t)
	srv.Handle("query-status", func(qmptest.Request) (any, error) {
		return qmp.StatusInfo{Status: "running", Running: true}, nil
	})
	d, _ := newTestDomain()
	d.close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, _, err := d.attach(ctx, srv.Path(), "/nonexistent/qga.sock"); !errors.Is(err, errDomainClosed) {
		t.Fatalf("attach after close: %v, want errDomainClosed", err)
	}
	if d.view().QMPConnected || d.qmpConn() != nil {
		t.Error("a closed domain holds a QMP connection")
	}
}

func TestVserportOpened(t *testing.T) {
	tests := []struct {
		data string
		want bool
	}{
		{`{"id": "channel0", "open": true}`, true},
		{`{"id": "channel0", "open": false}`, false},
		{`{"id": "channel0"}`, false},
		{``, false},
		{`not json`, false},
	}
	for _, tt := range tests {
		if got := vserportOpened(json.RawMessage(tt.data)); got != tt.want {
			t.Errorf("vserportOpened(%s) = %v, want %v", tt.data, got, tt.want)
		}
	}
}
