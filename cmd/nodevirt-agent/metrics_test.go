package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nodevirt/nodevirt/node/metrics"
)

type oneVM struct{}

func (oneVM) VMs() []metrics.VM {
	return []metrics.VM{{UID: "u", Namespace: "ns", Name: "vm", Phase: "Running", Live: true}}
}

func (oneVM) Stats(context.Context, metrics.VM) (metrics.Stats, error) {
	return metrics.Stats{CPU: &metrics.CPU{UsageSeconds: 2}}, nil
}

func TestMetricsMux(t *testing.T) {
	reg := newRegistry()
	c, err := metrics.New(metrics.Config{Node: "n1", Timeout: time.Second}, oneVM{})
	if err != nil {
		t.Fatal(err)
	}
	reg.MustRegister(c)
	var notReady error = errors.New("re-adopting: 3 of 5 domains not synced yet")
	ready := func() error { return notReady }
	srv := httptest.NewServer(metricsMux(reg, time.Second, ready, slog.New(slog.DiscardHandler)))
	defer srv.Close()

	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "3 of 5") {
		t.Errorf("GET /readyz while re-adopting: %d %q, want 503 with the reason", code, body)
	}
	notReady = nil

	tests := []struct {
		path string
		want []string
	}{
		{"/healthz", []string{"ok"}},
		{"/readyz", []string{"ok"}},
		{"/metrics", []string{
			`kubevirt_vmi_cpu_usage_seconds_total{name="vm",namespace="ns",node="n1"} 2`,
			`kubevirt_vmi_phase_count{node="n1",os="",phase="Running"} 1`,
			"go_goroutines",
			"process_resident_memory_bytes",
		}},
	}
	for _, tt := range tests {
		code, b := get(tt.path)
		if code != http.StatusOK {
			t.Errorf("GET %s: HTTP %d", tt.path, code)
		}
		for _, w := range tt.want {
			if !strings.Contains(b, w) {
				t.Errorf("GET %s: missing %q", tt.path, w)
			}
		}
	}
}
