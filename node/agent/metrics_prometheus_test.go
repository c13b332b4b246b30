package agent_test

import (
	"testing"
	"time"

	"github.com/nodevirt/nodevirt/node/metrics/promtest"
)

// startPrometheus starts a real Prometheus (promtest) scraping the agent at
// target every second until the test ends.
func startPrometheus(t *testing.T, target string) *promtest.Server {
	t.Helper()
	return promtest.Start(t, promtest.Config{ScrapeConfigs: promtest.StaticScrape("nodevirt-agent", target)})
}

// wantPromSeries polls Prometheus until every query returns a series and
// checks that the first carries labels.
func wantPromSeries(t *testing.T, p *promtest.Server, labels map[string]string, queries ...string) {
	t.Helper()
	for _, q := range queries {
		got := p.WaitQuery(t, 60*time.Second, q)[0]
		for k, v := range labels {
			if got.Metric[k] != v {
				t.Errorf("%s: label %s = %q, want %q (series %v)", q, k, got.Metric[k], v, got.Metric)
			}
		}
		t.Logf("Prometheus: %s → %v = %v", q, got.Metric, got.Value[1])
	}
}
