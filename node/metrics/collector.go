package metrics

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Config configures a Collector.
type Config struct {
	// Node is the node name, the node label of every series.
	Node string
	// Timeout bounds the statistics of one scrape (all VMs, concurrently).
	Timeout time.Duration
	// Log receives one line per failed or timed-out VM; nil is silent.
	Log *slog.Logger
}

// Validate reports what is wrong with c.
func (c Config) Validate() error {
	var errs []error
	if c.Node == "" {
		errs = append(errs, errors.New("node name is empty"))
	}
	if c.Timeout <= 0 {
		errs = append(errs, errors.New("timeout must be positive"))
	}
	return errors.Join(errs...)
}

// Collector is the prometheus.Collector of the node's VM statistics.
type Collector struct {
	cfg      Config
	src      Source
	log      *slog.Logger
	d        descs
	timeouts prometheus.Counter
}

// New returns a Collector of src's VMs.
func New(cfg Config, src Source) (*Collector, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if src == nil {
		return nil, errors.New("metrics: source is nil")
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Collector{
		cfg: cfg, src: src, log: log, d: newDescs(cfg.Node),
		timeouts: prometheus.NewCounter(prometheus.CounterOpts{
			Name:        "nodevirt_agent_scrape_timeouts_total",
			Help:        "VMs left out of a scrape because their statistics missed the deadline.",
			ConstLabels: prometheus.Labels{"node": cfg.Node},
		}),
	}, nil
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.d.all() {
		ch <- d
	}
	c.timeouts.Describe(ch)
}

// result is one VM's statistics or error.
type result struct {
	vm    VM
	stats Stats
	err   error
}

// Collect implements prometheus.Collector: phase counts, then every live
// VM's statistics gathered concurrently under Config.Timeout.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	start := time.Now()
	vms := c.src.VMs()
	c.collectPhases(ch, vms)

	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.Timeout)
	defer cancel()
	// Buffered for every VM: a goroutine finishing after the deadline
	// never blocks on a send nobody receives.
	results := make(chan result, len(vms))
	pending := map[string]VM{}
	for _, vm := range vms {
		if !vm.Live {
			continue
		}
		pending[vm.UID] = vm
		go func() {
			st, err := c.src.Stats(ctx, vm)
			results <- result{vm: vm, stats: st, err: err}
		}()
	}
	exported, failed := 0, 0
	for len(pending) > 0 {
		select {
		case r := <-results:
			delete(pending, r.vm.UID)
			if r.err != nil {
				failed++
				c.log.Debug("vm statistics", "namespace", r.vm.Namespace, "name", r.vm.Name, "err", r.err)
				continue
			}
			exported++
			c.export(ch, r.vm, r.stats)
		case <-ctx.Done():
			for _, vm := range pending {
				c.timeouts.Inc()
				c.log.Warn("vm statistics timed out", "namespace", vm.Namespace, "name", vm.Name, "uid", vm.UID, "timeout", c.cfg.Timeout)
			}
			pending = nil
		}
	}
	ch <- prometheus.MustNewConstMetric(c.d.scrapeDuration, prometheus.GaugeValue, time.Since(start).Seconds())
	ch <- prometheus.MustNewConstMetric(c.d.scrapeVMs, prometheus.GaugeValue, float64(exported))
	ch <- prometheus.MustNewConstMetric(c.d.errors, prometheus.GaugeValue, float64(failed))
	c.timeouts.Collect(ch)
}

// collectPhases exports the number of VMs per (phase, os).
func (c *Collector) collectPhases(ch chan<- prometheus.Metric, vms []VM) {
	type key struct{ phase, os string }
	counts := map[key]int{}
	for _, vm := range vms {
		counts[key{vm.Phase, vm.OS}]++
	}
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.d.phaseCount, prometheus.GaugeValue, float64(n), k.phase, k.os)
	}
}
