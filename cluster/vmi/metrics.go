package vmi

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// Metrics are the VMI controller's metrics.
type Metrics struct {
	phaseTransition *prometheus.HistogramVec
}

// NewMetrics creates the VMI metrics and registers them on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{phaseTransition: prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "kubevirt_vmi_phase_transition_time_from_creation_seconds",
		Help:    "Seconds from a VMI's creation to its entering a phase.",
		Buckets: []float64{0.5, 1, 2, 5, 10, 20, 30, 40, 50, 60, 90, 120, 180, 240, 300, 600, 1200, 1800, 3600},
	}, []string{"phase"})}
	if err := reg.Register(m.phaseTransition); err != nil {
		return nil, fmt.Errorf("register vmi metrics: %w", err)
	}
	return m, nil
}

// ObservePhaseChange records, for each phase transition cur has and old
// had not (informer update), the time from creation to that transition.
func (m *Metrics) ObservePhaseChange(old, cur *v1.VirtualMachineInstance) {
	if m == nil || len(cur.Status.PhaseTransitionTimestamps) <= len(old.Status.PhaseTransitionTimestamps) {
		return
	}
	for _, t := range cur.Status.PhaseTransitionTimestamps[len(old.Status.PhaseTransitionTimestamps):] {
		d := t.PhaseTransitionTimestamp.Sub(cur.CreationTimestamp.Time)
		m.phaseTransition.WithLabelValues(string(t.Phase)).Observe(max(d.Seconds(), 0))
	}
}
