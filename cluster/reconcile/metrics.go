package reconcile

import (
	"fmt"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
)

// Metrics are the work-queue and sync metrics of every Loop in one
// process; each loop fills its own "controller" label value.
type Metrics struct {
	depth   *prometheus.GaugeVec
	adds    *prometheus.CounterVec
	retries *prometheus.CounterVec
	sync    *prometheus.HistogramVec
}

// NewMetrics creates the loop metrics and registers them on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		depth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "nodevirt_controller_queue_depth",
			Help: "Keys waiting in a controller's work queue.",
		}, []string{"controller"}),
		adds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nodevirt_controller_queue_adds_total",
			Help: "Keys added to a controller's work queue.",
		}, []string{"controller"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nodevirt_controller_queue_retries_total",
			Help: "Keys requeued with backoff after a failed sync.",
		}, []string{"controller"}),
		sync: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "nodevirt_controller_sync_duration_seconds",
			Help:    "Time one sync of one key took.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"controller", "result"}),
	}
	for _, c := range []prometheus.Collector{m.depth, m.adds, m.retries, m.sync} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register controller loop metrics: %w", err)
		}
	}
	return m, nil
}

func (m *Metrics) observeSync(name string, d time.Duration, err error) {
	result := "success"
	switch {
	case apierrors.IsConflict(err):
		result = "conflict" // a write from a stale view: the sync's wasted request
	case err != nil:
		result = "error"
	}
	m.sync.WithLabelValues(name, result).Observe(d.Seconds())
}

// provider adapts the metrics to workqueue.MetricsProvider for one queue;
// the latency and duration series workqueue offers are not exported.
func (m *Metrics) provider(name string) workqueue.MetricsProvider {
	return queueMetrics{m: m, name: name}
}

type queueMetrics struct {
	m    *Metrics
	name string
}

type noop struct{}

func (noop) Inc()            {}
func (noop) Dec()            {}
func (noop) Set(float64)     {}
func (noop) Observe(float64) {}

func (q queueMetrics) NewDepthMetric(string) workqueue.GaugeMetric {
	return q.m.depth.WithLabelValues(q.name)
}
func (q queueMetrics) NewAddsMetric(string) workqueue.CounterMetric {
	return q.m.adds.WithLabelValues(q.name)
}
func (q queueMetrics) NewRetriesMetric(string) workqueue.CounterMetric {
	return q.m.retries.WithLabelValues(q.name)
}
func (queueMetrics) NewLatencyMetric(string) workqueue.HistogramMetric      { return noop{} }
func (queueMetrics) NewWorkDurationMetric(string) workqueue.HistogramMetric { return noop{} }
func (queueMetrics) NewUnfinishedWorkSecondsMetric(string) workqueue.SettableGaugeMetric {
	return noop{}
}
func (queueMetrics) NewLongestRunningProcessorSecondsMetric(string) workqueue.SettableGaugeMetric {
	return noop{}
}
