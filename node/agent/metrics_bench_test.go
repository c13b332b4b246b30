package agent_test

import (
	"fmt"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/nodevirt/nodevirt/hack/testenv"
)

// TestMetrics_ScrapeTime measures the agent's /metrics scrape time with 1
// and 20 VMs (startStrategy Paused: QEMU and QMP are up, the guests do not
// run). It starts 20 QEMUs, so it runs only with NODEVIRT_BENCH=1 (make
// bench-metrics).
func TestMetrics_ScrapeTime(t *testing.T) {
	if os.Getenv("NODEVIRT_BENCH") != "1" {
		t.Skip("a measurement with 20 QEMUs: set NODEVIRT_BENCH=1 (make bench-metrics)")
	}
	h := newHarness(t)
	h.startAgent(t)
	created := 0
	for _, n := range []int{1, 20} {
		for ; created < n; created++ {
			v := h.createVM(t, fmt.Sprintf("bench-%02d", created), vmOpts{paused: true})
			v.serial.stop()
		}
		testenv.Eventually(t, 5*time.Minute, fmt.Sprintf("%d live VMs on /metrics", n), func() bool {
			vms, _ := sample(h.scrape(t), "nodevirt_agent_scrape_vms", map[string]string{"node": testNode})
			return int(vms) == n
		})
		const scrapes = 20
		d := make([]time.Duration, 0, scrapes)
		var series int
		for range scrapes {
			start := time.Now()
			fams := h.scrape(t)
			d = append(d, time.Since(start))
			series = 0
			for _, mf := range fams {
				series += len(mf.GetMetric())
			}
		}
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		t.Logf("%2d VMs: scrape p50 %v, p90 %v, max %v over %d scrapes (%d series)",
			n, d[len(d)/2].Round(10*time.Microsecond), d[len(d)*9/10].Round(10*time.Microsecond),
			d[len(d)-1].Round(10*time.Microsecond), scrapes, series)
	}
}
