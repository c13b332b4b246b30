package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// agentMetricsPort is the agent's metrics port (deploy/agent).
const agentMetricsPort = "8443"

// agentMetrics scrapes the agent's /metrics once and parses it.
func (e *env) agentMetrics(ctx context.Context, podIP string) (map[string]*dto.MetricFamily, error) {
	body, err := e.scrape(ctx, podIP)
	if err != nil {
		return nil, err
	}
	fams, err := parseMetrics(body)
	if err != nil {
		return nil, fmt.Errorf("agent metrics at %s: %w", podIP, err)
	}
	return fams, nil
}

// parseMetrics parses a /metrics body (Prometheus text format) into its
// metric families by name. It is pure.
func parseMetrics(body []byte) (map[string]*dto.MetricFamily, error) {
	var p expfmt.TextParser
	return p.TextToMetricFamilies(bytes.NewReader(body))
}

// scrape GETs the agent's /metrics and returns the body.
func (e *env) scrape(ctx context.Context, podIP string) ([]byte, error) {
	url := "http://" + net.JoinHostPort(podIP, agentMetricsPort) + "/metrics"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := e.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: HTTP %d: %s", url, resp.StatusCode, b)
	}
	return b, nil
}

// scrapeTimes scrapes the agent n times, a second apart, and returns how
// long each took (request to last byte) and the number of series.
func (e *env) scrapeTimes(ctx context.Context, n int) ([]time.Duration, int, error) {
	pod, err := e.agentPod(ctx)
	if err != nil {
		return nil, 0, err
	}
	var out []time.Duration
	series := 0
	for i := range n {
		if i > 0 {
			time.Sleep(time.Second)
		}
		start := time.Now()
		body, err := e.scrape(ctx, pod.Status.PodIP)
		if err != nil {
			return nil, 0, err
		}
		out = append(out, time.Since(start))
		series = 0
		for _, l := range strings.Split(string(body), "\n") {
			if strings.HasPrefix(l, "kubevirt_") {
				series++
			}
		}
	}
	return out, series, nil
}

// gauge returns the value of the unlabelled-or-first sample of a gauge.
func gauge(fams map[string]*dto.MetricFamily, name string) (float64, bool) {
	f, ok := fams[name]
	if !ok || len(f.GetMetric()) == 0 {
		return 0, false
	}
	return f.GetMetric()[0].GetGauge().GetValue(), true
}

// agentSyncs reads how many VMI syncs the node's agent has run and how
// long they took in all: the count and sum of its
// nodevirt_agent_reconcile_duration_seconds histogram, every result.
func (e *env) agentSyncs(ctx context.Context) (n uint64, took time.Duration, err error) {
	pod, err := e.agentPod(ctx)
	if err != nil {
		return 0, 0, err
	}
	fams, err := e.agentMetrics(ctx, pod.Status.PodIP)
	if err != nil {
		return 0, 0, err
	}
	f, ok := fams["nodevirt_agent_reconcile_duration_seconds"]
	if !ok {
		return 0, 0, errors.New("no nodevirt_agent_reconcile_duration_seconds on /metrics")
	}
	var sum float64
	for _, m := range f.GetMetric() {
		n += m.GetHistogram().GetSampleCount()
		sum += m.GetHistogram().GetSampleSum()
	}
	return n, time.Duration(sum * float64(time.Second)), nil
}
