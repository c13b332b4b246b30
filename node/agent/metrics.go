package agent

import (
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// agentMetrics are the agent's own metrics, observed where they happen:
// reconcile latency in the worker loop, QMP latency in the statistics
// source. The per-VM statistics are node/metrics' Collector
// (Agent.MetricsSource).
type agentMetrics struct {
	reconcile *prometheus.HistogramVec // by result
	qmp       *prometheus.HistogramVec // by command
}

// newAgentMetrics creates the agent's metrics and registers them, with the
// store's file size and the number of QMP-connected domains (connected),
// on reg (nil: not exported).
func newAgentMetrics(reg prometheus.Registerer, node, dbPath string, connected func() int) (*agentMetrics, error) {
	constLabels := prometheus.Labels{"node": node}
	m := &agentMetrics{
		reconcile: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:        "nodevirt_agent_reconcile_duration_seconds",
			Help:        "Time one sync of a VMI took, by result (ok, error).",
			ConstLabels: constLabels,
			Buckets:     prometheus.ExponentialBuckets(0.001, 4, 9),
		}, []string{"result"}),
		qmp: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:        "nodevirt_agent_qmp_call_duration_seconds",
			Help:        "Time QMP and guest agent calls of the statistics source took, by command.",
			ConstLabels: constLabels,
			Buckets:     prometheus.ExponentialBuckets(0.0001, 4, 9),
		}, []string{"command"}),
	}
	if reg == nil {
		return m, nil
	}
	storeSize := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "nodevirt_agent_store_size_bytes",
		Help:        "Size of the agent's bbolt file.",
		ConstLabels: constLabels,
	}, func() float64 {
		fi, err := os.Stat(dbPath)
		if err != nil {
			return 0
		}
		return float64(fi.Size())
	})
	domains := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "nodevirt_agent_domains_connected",
		Help: "Domains whose QEMU the agent holds a QMP connection to. After an agent " +
			"restart it climbs back to the number of running VMs as they are re-adopted.",
		ConstLabels: constLabels,
	}, func() float64 { return float64(connected()) })
	for _, c := range []prometheus.Collector{m.reconcile, m.qmp, storeSize, domains} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// observeSync records one sync's duration (the work loop's observer).
func (m *agentMetrics) observeSync(took time.Duration, err error) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.reconcile.WithLabelValues(result).Observe(took.Seconds())
}

// timeQMP returns a func that records the duration of command when called.
func (m *agentMetrics) timeQMP(command string) func() {
	start := time.Now()
	return func() { m.qmp.WithLabelValues(command).Observe(time.Since(start).Seconds()) }
}
