package store_test

import (
	"context"
	"encoding/json"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/nodevirt/nodevirt/store"
)

// t0 is a fixed instant, so that tests do not depend on the clock.
var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// cmpOpts compares records holding netip values.
var cmpOpts = cmp.Options{cmpopts.EquateComparable(netip.Addr{}, netip.Prefix{})}

// openTest opens a fresh writable store in t.TempDir and closes it at cleanup.
func openTest(t testing.TB, opts store.Options) (*store.DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "agent.db")
	return reopen(t, path, opts), path
}

// reopen opens path and closes it at cleanup.
func reopen(t testing.TB, path string, opts store.Options) *store.DB {
	t.Helper()
	db, err := store.Open(path, opts)
	if err != nil {
		t.Fatalf("Open(%q): %v", path, err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// fullRecord returns a record with every field set.
func fullRecord(uid string) store.Record {
	return store.Record{
		UID:       uid,
		Namespace: "default",
		Name:      "vm-" + uid,
		PodUID:    "pod-" + uid,
		Spec:      json.RawMessage(`{"memory":"128Mi","cpus":1}`),
		Process:   store.Process{PID: 4242, StartTime: 123456, BootID: "b00t"},
		Sockets: store.Sockets{
			Dir:        "/var/lib/kubelet/pods/p/volumes/kubernetes.io~empty-dir/sockets",
			Launcher:   "launcher.sock",
			QMP:        "qmp.sock",
			GuestAgent: "qga.sock",
			Serial:     "serial.sock",
			VNC:        "vnc.sock",
		},
		Interfaces: []store.Interface{{
			Name:    "default",
			Binding: "masquerade",
			Tap:     "tap0",
			Bridge:  "k6t-eth0",
			MAC:     "02:00:00:00:00:01",
			IPs:     []netip.Prefix{netip.MustParsePrefix("10.0.2.2/24")},
			Gateway: netip.MustParseAddr("10.0.2.1"),
			PodIPs:  []netip.Prefix{netip.MustParsePrefix("10.244.0.7/24"), netip.MustParsePrefix("fd00::7/64")},
		}},
		Intent: store.Intent{
			Paused: true,
			Stop:   &store.Stop{Requested: t0, Deadline: t0.Add(30 * time.Second), Reason: "Deleted"},
			Freeze: &store.Freeze{Requested: t0, Deadline: t0.Add(5 * time.Minute)},
		},
		Observed: store.Observed{
			Phase:       "Running",
			RunState:    "paused",
			Reason:      "PausedByUser",
			At:          t0.Add(time.Second),
			Started:     t0,
			Transitions: []store.Transition{{Phase: "Scheduled", At: t0}, {Phase: "Running", At: t0.Add(time.Second)}},
		},
		Migration: &store.Migration{
			UID: "mig-1", Role: "source", State: "Running", SourceNode: "n1", TargetNode: "n2",
			Address: "10.199.0.2:49152", Started: t0,
		},
	}
}

// ev returns an event at t0+sec seconds.
func ev(sec int, reason string) store.Event {
	return store.Event{Time: t0.Add(time.Duration(sec) * time.Second), Reason: reason}
}

func mustPut(t *testing.T, db *store.DB, r store.Record, events ...store.Event) {
	t.Helper()
	if err := db.Put(context.Background(), r, events...); err != nil {
		t.Fatalf("Put(%q): %v", r.UID, err)
	}
}
