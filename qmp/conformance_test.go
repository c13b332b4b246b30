package qmp_test

import (
	"sync"
	"testing"
	"time"

	"github.com/nodevirt/nodevirt/qmp"
	"github.com/nodevirt/nodevirt/qmp/qmptest"
)

// conformance is what callers may rely on from any QMP peer; it runs against
// the scripted fake (as tests of callers script it) and against real QEMU,
// so the fake stays faithful.
func conformance(t *testing.T, c *qmp.Conn) {
	ctx := ctxT(t, 20*time.Second)
	events := c.Subscribe(16, qmp.EventStop, qmp.EventResume)
	defer events.Close()

	if err := c.Execute(ctx, "no-such-command", nil, nil); !qmp.IsClass(err, qmp.ClassCommandNotFound) {
		t.Errorf("unknown command: %v, want class CommandNotFound", err)
	}
	if err := c.Execute(ctx, "device_del", map[string]string{"id": "nope"}, nil); !qmp.IsClass(err, qmp.ClassDeviceNotFound) {
		t.Errorf("device_del of a missing device: %v, want class DeviceNotFound", err)
	}
	steps := []struct {
		do    func() error
		event string
		state string
	}{
		{func() error { return c.Stop(ctx) }, qmp.EventStop, qmp.RunStatePaused},
		{func() error { return c.Cont(ctx) }, qmp.EventResume, qmp.RunStateRunning},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Fatal(err)
		}
		waitEvent(t, events, s.event, 5*time.Second)
		st, err := c.QueryStatus(ctx)
		if err != nil || st.Status != s.state || st.Running != (s.state == qmp.RunStateRunning) {
			t.Errorf("after %s: status %+v, %v; want %s", s.event, st, err, s.state)
		}
	}
}

func TestConformance_Fake(t *testing.T) {
	s := qmptest.NewServer(t)
	var mu sync.Mutex
	state := qmp.RunStateRunning
	s.Handle("query-status", func(qmptest.Request) (any, error) {
		mu.Lock()
		defer mu.Unlock()
		return qmp.StatusInfo{Running: state == qmp.RunStateRunning, Status: state}, nil
	})
	set := func(st, event string) qmptest.Handler {
		return func(qmptest.Request) (any, error) {
			mu.Lock()
			state = st
			mu.Unlock()
			s.Emit(event, nil) // QEMU sends the event before the reply
			return nil, nil
		}
	}
	s.Handle("stop", set(qmp.RunStatePaused, qmp.EventStop))
	s.Handle("cont", set(qmp.RunStateRunning, qmp.EventResume))
	s.Handle("device_del", func(qmptest.Request) (any, error) {
		return nil, &qmp.Error{Class: qmp.ClassDeviceNotFound, Desc: "Device 'nope' not found"}
	})
	conformance(t, dial(t, s))
}

func TestConformance_QEMU(t *testing.T) {
	t.Parallel()
	vm := startVM(t, vmConfig{})
	conformance(t, vm.DialQMP(t)) // no need to wait for the guest to boot
}
