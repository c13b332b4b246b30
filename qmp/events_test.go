package qmp_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nodevirt/nodevirt/qmp"
	"github.com/nodevirt/nodevirt/qmp/qmptest"
)

func TestEvent_Typed(t *testing.T) {
	tests := []struct {
		name string
		data string
		want any
	}{
		{qmp.EventStop, ``, &qmp.StopEvent{}},
		{qmp.EventResume, ``, &qmp.ResumeEvent{}},
		{qmp.EventPowerdown, ``, &qmp.PowerdownEvent{}},
		{qmp.EventShutdown, `{"guest":true,"reason":"guest-shutdown"}`, &qmp.ShutdownEvent{Guest: true, Reason: "guest-shutdown"}},
		{qmp.EventShutdown, `{"guest":false,"reason":"host-qmp-quit"}`, &qmp.ShutdownEvent{Reason: "host-qmp-quit"}},
		{qmp.EventReset, `{"guest":false,"reason":"host-qmp-system-reset"}`, &qmp.ResetEvent{Reason: "host-qmp-system-reset"}},
		{qmp.EventMigration, `{"status":"completed"}`, &qmp.MigrationEvent{Status: qmp.MigrationCompleted}},
		{qmp.EventGuestPanicked, `{"action":"pause"}`, &qmp.GuestPanickedEvent{Action: "pause"}},
		{qmp.EventDeviceDeleted, `{"device":"nic1","path":"/machine/peripheral/nic1"}`, &qmp.DeviceDeletedEvent{Device: "nic1", Path: "/machine/peripheral/nic1"}},
		{"VNC_CONNECTED", `{"x":1}`, qmp.Event{Name: "VNC_CONNECTED", Data: json.RawMessage(`{"x":1}`)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := qmp.Event{Name: tt.name}
			if tt.data != "" {
				e.Data = json.RawMessage(tt.data)
			}
			got, err := e.Typed()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Typed (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSubscription_ReceivesFilteredEvents(t *testing.T) {
	s := qmptest.NewServer(t)
	c := dial(t, s)
	all := c.Subscribe(8)
	shutdowns := c.Subscribe(8, qmp.EventShutdown)

	s.Emit(qmp.EventStop, nil)
	s.Emit(qmp.EventShutdown, map[string]any{"guest": true, "reason": "guest-shutdown"})

	var names []string
	for range 2 {
		e := recv(t, all.Events())
		names = append(names, e.Name)
	}
	if diff := cmp.Diff([]string{qmp.EventStop, qmp.EventShutdown}, names); diff != "" {
		t.Errorf("all events (-want +got):\n%s", diff)
	}
	e := recv(t, shutdowns.Events())
	if want := time.Unix(1700000000, 42000); !e.Time.Equal(want) {
		t.Errorf("event time = %v, want %v", e.Time, want)
	}
	got, err := e.Typed()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&qmp.ShutdownEvent{Guest: true, Reason: "guest-shutdown"}, got); diff != "" {
		t.Errorf("shutdown event (-want +got):\n%s", diff)
	}
	shutdowns.Close()
	shutdowns.Close() // idempotent
	if _, ok := <-shutdowns.Events(); ok {
		t.Error("channel open after Close")
	}
}

func TestSubscription_OverflowDropsAndCountsWithoutBlockingCommands(t *testing.T) {
	s := qmptest.NewServer(t)
	s.Handle("query-status", func(qmptest.Request) (any, error) {
		return qmp.StatusInfo{Running: true, Status: qmp.RunStateRunning}, nil
	})
	c := dial(t, s)
	slow := c.Subscribe(2) // never read until the end

	const n = 50
	for range n {
		s.Emit(qmp.EventStop, nil)
	}
	// Commands still flow while the subscriber sleeps.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.QueryStatus(ctx); err != nil {
		t.Fatalf("QueryStatus with a full subscriber: %v", err)
	}
	// The reply came after every event on the wire, so all were dispatched.
	if got, want := slow.Dropped(), uint64(n-2); got != want {
		t.Errorf("Dropped() = %d, want %d", got, want)
	}
	if got := len(slow.Events()); got != 2 {
		t.Errorf("buffered events = %d, want 2", got)
	}
}

func recv(t *testing.T, ch <-chan qmp.Event) qmp.Event {
	t.Helper()
	select {
	case e, ok := <-ch:
		if !ok {
			t.Fatal("event channel closed")
		}
		return e
	case <-time.After(5 * time.Second):
		t.Fatal("no event within 5s")
	}
	return qmp.Event{}
}
