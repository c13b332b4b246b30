package main

import (
	"math"
	"slices"
	"time"
)

// Figure is one measured quantity over its samples.
type Figure struct {
	Scenario string  `json:"scenario"`
	Name     string  `json:"name"`
	Unit     string  `json:"unit"`
	N        int     `json:"n"`
	Min      float64 `json:"min"`
	Median   float64 `json:"median"`
	P95      float64 `json:"p95"`
	P99      float64 `json:"p99"`
	Max      float64 `json:"max"`
	// KubeVirt is the published KubeVirt figure to compare with, if any.
	KubeVirt string `json:"kubevirt,omitempty"`
	// RunMedians are the medians of each run of a repeated scenario (the
	// statistics above are over all runs' samples).
	RunMedians []float64 `json:"runMedians,omitempty"`

	samples []float64
}

// merge returns f with g's samples (another run of the same figure) added.
// A run without samples (a floor that could not be taken in it) adds no
// run median.
func (f Figure) merge(g Figure) Figure {
	if g.N == 0 {
		return f
	}
	if f.N == 0 {
		g.KubeVirt = f.KubeVirt
		return g
	}
	out := summarize(f.Scenario, f.Name, f.Unit, append(slices.Clone(f.samples), g.samples...))
	out.KubeVirt = f.KubeVirt
	out.RunMedians = slices.Clone(f.RunMedians)
	if len(out.RunMedians) == 0 {
		out.RunMedians = []float64{f.Median}
	}
	out.RunMedians = append(out.RunMedians, g.Median)
	return out
}

// summarize computes a figure from samples (any order). An empty sample
// set gives a figure with N = 0 and zero statistics.
func summarize(scenario, name, unit string, samples []float64) Figure {
	f := Figure{Scenario: scenario, Name: name, Unit: unit, N: len(samples)}
	if len(samples) == 0 {
		return f
	}
	s := slices.Clone(samples)
	f.samples = s
	slices.Sort(s)
	f.Min, f.Max = s[0], s[len(s)-1]
	f.Median = percentile(s, 50)
	f.P95 = percentile(s, 95)
	f.P99 = percentile(s, 99)
	return f
}

// percentile is the nearest-rank percentile p (0 < p ≤ 100) of sorted s.
func percentile(sorted []float64, p float64) float64 {
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	rank = max(rank, 1)
	return sorted[min(rank, len(sorted))-1]
}

// seconds converts durations to seconds.
func seconds(ds []time.Duration) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		out[i] = d.Seconds()
	}
	return out
}

// millis converts durations to milliseconds.
func millis(ds []time.Duration) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		out[i] = float64(d) / float64(time.Millisecond)
	}
	return out
}
