package main

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestSummarize(t *testing.T) {
	tests := []struct {
		name    string
		samples []float64
		want    Figure
	}{
		{"empty", nil, Figure{Scenario: "s", Name: "n", Unit: "s"}},
		{"one", []float64{3}, Figure{Scenario: "s", Name: "n", Unit: "s", N: 1, Min: 3, Median: 3, P95: 3, P99: 3, Max: 3}},
		{"unsorted", []float64{5, 1, 4, 2, 3}, Figure{Scenario: "s", Name: "n", Unit: "s", N: 5, Min: 1, Median: 3, P95: 5, P99: 5, Max: 5}},
		{"hundred", series(100), Figure{Scenario: "s", Name: "n", Unit: "s", N: 100, Min: 1, Median: 50, P95: 95, P99: 99, Max: 100}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, summarize("s", "n", "s", tt.samples), cmpopts.IgnoreUnexported(Figure{})); diff != "" {
				t.Errorf("summarize (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSummarizeKeepsInput(t *testing.T) {
	in := []float64{3, 1, 2}
	summarize("s", "n", "s", in)
	if diff := cmp.Diff([]float64{3, 1, 2}, in); diff != "" {
		t.Errorf("input changed (-want +got):\n%s", diff)
	}
}

func TestConversions(t *testing.T) {
	ds := []time.Duration{1500 * time.Millisecond, 2 * time.Millisecond}
	if diff := cmp.Diff([]float64{1.5, 0.002}, seconds(ds)); diff != "" {
		t.Errorf("seconds (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]float64{1500, 2}, millis(ds)); diff != "" {
		t.Errorf("millis (-want +got):\n%s", diff)
	}
}

// series is 1, 2, …, n.
func series(n int) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = float64(i + 1)
	}
	return s
}
