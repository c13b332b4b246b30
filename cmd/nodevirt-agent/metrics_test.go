package main

import (
	"context"
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
	srv := httptest.NewServer(metricsMux(reg, time.Second, slog.New(slog.DiscardHandler)))
	defer srv.Close()

	tests := []struct {
		path string
		want []string
	}{
		{"/healthz", []string{"ok"}},
		{"/metrics", []string{
			`kubevirt_vmi_cpu_usage_seconds_total{name="vm",namespace="ns",node="n1"} 2`,
			`kubevirt_vmi_phase_count{node="n1",os="",phase="Running"} 1`,
			"go_goroutines",
			"process_resident_memory_bytes",
		}},
	}
	for _, tt := range tests {
		resp, err := http.Get(srv.URL + tt.path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %s", tt.path, resp.Status)
		}
		for _, w := range tt.want {
			if !strings.Contains(string(b), w) {
				t.Errorf("GET %s: missing %q", tt.path, w)
			}
		}
	}
}
