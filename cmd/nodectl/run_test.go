package main

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodevirt/nodevirt/store"
)

// TestRun_AgentDown reads the store read-only when no agent listens.
func TestRun_AgentDown(t *testing.T) {
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "agent.db")
	db, err := store.Open(dbPath, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	rec := store.Record{UID: "u1", Namespace: "ns", Name: "vm", Intent: store.Intent{Paused: true},
		Observed: store.Observed{Phase: "Running"}, Process: store.Process{PID: 42}}
	if err := db.Put(ctx, rec, store.Event{Time: at, Reason: "Adopted"}, store.Event{Time: at, Reason: "PauseRequested"}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, string, error) {
		var out, errb strings.Builder
		cfg := Config{Socket: filepath.Join(dir, "no-agent.sock"), DB: dbPath, Stdout: &out, Stderr: &errb}
		err := Run(ctx, cfg, args)
		return out.String(), errb.String(), err
	}
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"list"}, []string{"NAMESPACE", "ns  ", "vm  ", "u1", "Running", "true", "42"}},
		{[]string{"show", "ns/vm"}, []string{`"uid": "u1"`, `"paused": true`}},
		{[]string{"show", "u1"}, []string{`"name": "vm"`}},
		{[]string{"timeline", "ns/vm"}, []string{"2026-01-02T03:04:05Z", "Adopted", "PauseRequested"}},
	}
	for _, tt := range tests {
		out, stderr, err := run(tt.args...)
		if err != nil {
			t.Errorf("%v: %v", tt.args, err)
			continue
		}
		if !strings.Contains(stderr, "not running") || !strings.Contains(stderr, "read-only") {
			t.Errorf("%v: stderr %q does not say the store is read read-only", tt.args, stderr)
		}
		for _, w := range tt.want {
			if !strings.Contains(out, w) {
				t.Errorf("%v: output lacks %q:\n%s", tt.args, w, out)
			}
		}
	}
	if _, _, err := run("show", "ns/nosuch"); err == nil {
		t.Errorf("show of an unknown VMI succeeded")
	}
	if _, _, err := run("pause", "ns/vm"); err == nil {
		t.Errorf("pause with the agent down succeeded")
	}
	for _, bad := range [][]string{nil, {"list", "x"}, {"show"}, {"frobnicate", "x"}} {
		if _, _, err := run(bad...); !errors.Is(err, errUsage) {
			t.Errorf("%v: %v, want the usage error", bad, err)
		}
	}
}
