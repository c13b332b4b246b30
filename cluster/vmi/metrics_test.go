package vmi

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

func TestObservePhaseChange(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	old := baseVMI(func(v *v1.VirtualMachineInstance) { v.CreationTimestamp = metav1.NewTime(t0) })
	cur := old.DeepCopy()
	cur.Status.Phase = v1.Scheduling
	cur.Status.PhaseTransitionTimestamps = []v1.VirtualMachineInstancePhaseTransitionTimestamp{
		{Phase: v1.Pending, PhaseTransitionTimestamp: metav1.NewTime(t0.Add(time.Second))},
		{Phase: v1.Scheduling, PhaseTransitionTimestamp: metav1.NewTime(t0.Add(3 * time.Second))},
	}
	m.ObservePhaseChange(old, cur)
	m.ObservePhaseChange(cur, cur) // no new transition: nothing observed
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sums := map[string]float64{}
	for _, f := range families {
		for _, metric := range f.GetMetric() {
			sums[metric.GetLabel()[0].GetValue()] = metric.GetHistogram().GetSampleSum()
		}
	}
	if sums["Pending"] != 1 || sums["Scheduling"] != 3 || len(sums) != 2 {
		t.Errorf("observed seconds by phase = %v, want Pending 1, Scheduling 3", sums)
	}
}
