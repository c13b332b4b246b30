package qmp_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nodevirt/nodevirt/hack/testenv"
	"github.com/nodevirt/nodevirt/qmp"
	"github.com/nodevirt/nodevirt/qmp/qmptest"
)

func dialAgent(t *testing.T, s *qmptest.Server) *qmp.Agent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	a, err := qmp.DialAgent(ctx, s.Path())
	if err != nil {
		t.Fatalf("DialAgent: %v", err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

func TestAgent_SyncDiscardsStaleBytes(t *testing.T) {
	s := qmptest.NewAgentServer(t)
	// Leftovers of an interrupted exchange: a half reply, a whole stale one.
	s.SetStale([]byte(`{"return": {"pid": 7` + "\n" + `{"return": 12345}` + "\n"))
	s.Handle("guest-get-host-name", func(qmptest.Request) (any, error) {
		return map[string]string{"host-name": "vm1"}, nil
	})
	a := dialAgent(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	h, err := a.HostName(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if h != "vm1" {
		t.Errorf("HostName = %q, want vm1", h)
	}
	if err := a.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	// One sync, then the commands: no resync while in step.
	want := []string{"guest-sync-delimited", "guest-get-host-name", "guest-ping"}
	if diff := cmp.Diff(want, commands(s.Received())); diff != "" {
		t.Errorf("commands (-want +got):\n%s", diff)
	}
}

func TestAgent_NeverAnswersThenResyncs(t *testing.T) {
	s := qmptest.NewAgentServer(t)
	var hung atomic.Bool
	hung.Store(true)
	s.Handle("guest-info", func(qmptest.Request) (any, error) {
		if hung.Load() {
			return nil, qmptest.ErrNoReply
		}
		return qmp.AgentInfo{Version: "7.2.22"}, nil
	})
	a := dialAgent(t, s)
	if err := a.Ping(ctxT(t, 5*time.Second)); err != nil { // in sync
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := a.Info(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Info error = %v, want DeadlineExceeded", err)
	}

	hung.Store(false)
	ctx2, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel2()
	info, err := a.Info(ctx2)
	if err != nil {
		t.Fatal(err)
	}
	if info.Version != "7.2.22" {
		t.Errorf("Version = %q", info.Version)
	}
	want := []string{"guest-sync-delimited", "guest-ping", "guest-info", "guest-sync-delimited", "guest-info"}
	if diff := cmp.Diff(want, commands(s.Received())); diff != "" {
		t.Errorf("commands (-want +got):\n%s", diff)
	}
}

func TestAgent_AgentNotRunning(t *testing.T) {
	s := qmptest.NewAgentServer(t)
	s.Handle("guest-sync-delimited", func(qmptest.Request) (any, error) { return nil, qmptest.ErrNoReply })
	a := dialAgent(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := a.Ping(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Ping error = %v, want DeadlineExceeded", err)
	}
}

func TestAgent_ErrorClassAndClose(t *testing.T) {
	s := qmptest.NewAgentServer(t)
	s.Handle("guest-fsfreeze-freeze", func(qmptest.Request) (any, error) {
		return nil, &qmp.Error{Class: qmp.ClassGenericError, Desc: "freeze failed"}
	})
	s.Handle("guest-get-osinfo", func(qmptest.Request) (any, error) { return nil, qmptest.ErrHangup })
	a := dialAgent(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	if _, err := a.FSFreezeFreeze(ctx); !qmp.IsClass(err, qmp.ClassGenericError) {
		t.Errorf("FSFreezeFreeze error = %v, want class GenericError", err)
	}
	if _, err := a.OSInfo(ctx); !errors.Is(err, qmp.ErrClosed) {
		t.Errorf("OSInfo on hangup = %v, want ErrClosed", err)
	}
	if err := a.Ping(ctx); !errors.Is(err, qmp.ErrClosed) {
		t.Errorf("Ping after hangup = %v, want ErrClosed", err)
	}
}

func TestAgent_CloseUnblocksWaiters(t *testing.T) {
	s := qmptest.NewAgentServer(t)
	s.Handle("guest-get-users", func(qmptest.Request) (any, error) { return nil, qmptest.ErrNoReply })
	a := dialAgent(t, s)
	const callers = 4
	errc := make(chan error, callers)
	for range callers {
		go func() {
			_, err := a.Users(context.Background())
			errc <- err
		}()
	}
	testenv.Eventually(t, 5*time.Second, "two commands received", func() bool { return len(s.Received()) >= 2 })
	a.Close()
	for range callers {
		select {
		case err := <-errc:
			if !errors.Is(err, qmp.ErrClosed) {
				t.Errorf("Users error = %v, want ErrClosed", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a caller is still blocked after Close")
		}
	}
}

func TestAgent_ShutdownDoesNotWaitForAReply(t *testing.T) {
	s := qmptest.NewAgentServer(t)
	s.Handle("guest-shutdown", func(qmptest.Request) (any, error) { return nil, qmptest.ErrNoReply })
	a := dialAgent(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := a.Shutdown(ctx, qmp.ShutdownPowerdown); err != nil {
		t.Fatal(err)
	}
	if err := a.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	got := s.Received()
	if diff := cmp.Diff([]string{"guest-sync-delimited", "guest-shutdown", "guest-sync-delimited", "guest-ping"}, commands(got)); diff != "" {
		t.Errorf("commands (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(json.RawMessage(`{"mode":"powerdown"}`), got[1].Arguments, cmp.Comparer(jsonEqual)); diff != "" {
		t.Errorf("arguments (-want +got):\n%s", diff)
	}
}

func TestAgent_Run(t *testing.T) {
	s := qmptest.NewAgentServer(t)
	polls := 0
	s.Handle("guest-exec", func(r qmptest.Request) (any, error) {
		return map[string]int{"pid": 42}, nil
	})
	s.Handle("guest-exec-status", func(r qmptest.Request) (any, error) {
		polls++
		if polls < 3 {
			return map[string]bool{"exited": false}, nil
		}
		return json.RawMessage(`{"exited":true,"exitcode":0,"out-data":"MTIzLjQ1IDQ1Ni43OAo="}`), nil
	})
	a := dialAgent(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := a.Run(ctx, "/bin/cat", "/proc/uptime")
	if err != nil {
		t.Fatal(err)
	}
	zero := 0
	want := qmp.ExecStatus{Exited: true, ExitCode: &zero, OutData: []byte("123.45 456.78\n")}
	if diff := cmp.Diff(want, st); diff != "" {
		t.Errorf("Run (-want +got):\n%s", diff)
	}
	var exec struct {
		Path    string   `json:"path"`
		Arg     []string `json:"arg"`
		Capture bool     `json:"capture-output"`
	}
	json.Unmarshal(s.Received()[1].Arguments, &exec)
	if exec.Path != "/bin/cat" || !exec.Capture || len(exec.Arg) != 1 {
		t.Errorf("guest-exec arguments = %+v", exec)
	}
}
