package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// promServer is a real Prometheus server run as a child process with a
// temporary config and storage directory, on a free loopback port.
type promServer struct {
	addr string
	cmd  *exec.Cmd
	log  string
}

// startPrometheus starts Prometheus scraping target every second; the
// process is killed (by its pid) and reaped at cleanup.
func startPrometheus(t *testing.T, target string) *promServer {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	need(t, err == nil, "prometheus is not installed", "metrics-deps")
	dir := t.TempDir()
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
- job_name: nodevirt-agent
  static_configs:
  - targets: [%q]
`, target)
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	p := &promServer{addr: freeLoopbackAddr(t), log: filepath.Join(dir, "prometheus.log")}
	logf, err := os.Create(p.log)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	p.cmd = exec.Command(bin, "--config.file="+cfgPath, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+p.addr)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
		if t.Failed() {
			t.Logf("prometheus log tail:\n%s", tail(p.log, 30))
		}
	})
	return p
}

// promSample is one element of an instant query's vector.
type promSample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

// query runs an instant PromQL query through the HTTP API.
func (p *promServer) query(ctx context.Context, q string) ([]promSample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet,
		"http://"+p.addr+"/api/v1/query?query="+url.QueryEscape(q), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []promSample `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("query %q: %w", q, err)
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("query %q: %s", q, body.Error)
	}
	return body.Data.Result, nil
}

// wantPromSeries polls Prometheus until every query returns a series
// carrying labels.
func (p *promServer) wantPromSeries(t *testing.T, labels map[string]string, queries ...string) {
	t.Helper()
	for _, q := range queries {
		var got []promSample
		waitFor(t, 60*time.Second, "Prometheus: "+q, func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			res, err := p.query(ctx, q)
			if err != nil || len(res) == 0 {
				return false
			}
			got = res
			return true
		})
		for k, v := range labels {
			if got[0].Metric[k] != v {
				t.Errorf("%s: label %s = %q, want %q (series %v)", q, k, got[0].Metric[k], v, got[0].Metric)
			}
		}
		t.Logf("Prometheus: %s → %v = %v", q, got[0].Metric, got[0].Value[1])
	}
}
