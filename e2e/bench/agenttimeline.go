package main

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// agentSteps are the agent's timeline events of a VMI start, in order
// (node/agent: the reasons it records).
var agentSteps = []string{"Adopted", "NetworkAllocated", "NetworkReady", "Launching", "Attached"}

// agentTimeline reports, over the VMIs named, the median time between
// consecutive start steps of the agent's own timeline (nodectl timeline):
// where the agent's part of a burst goes.
func agentTimeline(ctx context.Context, e *env, r *Report, label string, names []string) error {
	const sc = "burst"
	steps := map[string][]time.Duration{}
	for _, name := range names {
		evs, err := e.nodectl.Timeline(ctx, benchNamespace+"/"+name)
		if err != nil {
			return fmt.Errorf("timeline of VMI %s: %w", name, err)
		}
		first := map[string]time.Time{}
		for _, ev := range evs {
			if _, seen := first[ev.Reason]; !seen {
				first[ev.Reason] = ev.Time
			}
		}
		prev := ""
		for _, step := range agentSteps {
			at, ok := first[step]
			if !ok {
				continue
			}
			if prev != "" {
				key := prev + " → " + step
				steps[key] = append(steps[key], at.Sub(first[prev]))
			}
			prev = step
		}
	}
	for i, from := range agentSteps {
		for _, to := range agentSteps[i+1:] {
			key := from + " → " + to
			if ds := steps[key]; len(ds) > 0 {
				r.add(summarize(sc, fmt.Sprintf("%s: agent timeline %s", label, key), "s", seconds(ds)))
			}
		}
	}
	return nil
}

// sortedNames lists the keys of created in name order.
func sortedNames(created map[string]time.Time) []string {
	names := make([]string, 0, len(created))
	for n := range created {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
