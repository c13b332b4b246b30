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

// startSteps gathers, over VMIs, the time from their creation to the
// agent's first step, between consecutive steps of the agent's own
// timeline (nodectl timeline), and from its last step to Running seen
// through the API server: where the agent's part of a start goes. Keyed
// by "creation → Adopted", "Adopted → NetworkAllocated", ...
type startSteps map[string][]time.Duration

// collect adds the timeline of VMI name, created at created and seen
// Running at running (the benchmark client's clock; the agent runs on the
// same host).
func (s startSteps) collect(ctx context.Context, e *env, name string, created, running time.Time) error {
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
	if at, ok := first[agentSteps[0]]; ok && !created.IsZero() {
		s[createdKey] = append(s[createdKey], at.Sub(created))
	}
	prev := ""
	for _, step := range agentSteps {
		at, ok := first[step]
		if !ok {
			continue
		}
		if prev != "" {
			key := prev + " → " + step
			s[key] = append(s[key], at.Sub(first[prev]))
		}
		prev = step
	}
	if at, ok := first[agentSteps[len(agentSteps)-1]]; ok && !running.IsZero() {
		s[runningKey] = append(s[runningKey], running.Sub(at))
	}
	return nil
}

// The keys of startSteps at either end of the agent's steps.
var (
	createdKey = "creation → " + agentSteps[0]
	runningKey = agentSteps[len(agentSteps)-1] + " → Running in the API server"
)

// report adds one figure per step pair gathered, in the steps' order.
func (s startSteps) report(r *Report, sc, label string) {
	keys := []string{createdKey}
	for i, from := range agentSteps {
		for _, to := range agentSteps[i+1:] {
			keys = append(keys, from+" → "+to)
		}
	}
	keys = append(keys, runningKey)
	for _, key := range keys {
		if ds := s[key]; len(ds) > 0 {
			r.add(summarize(sc, fmt.Sprintf("%s: agent timeline %s", label, key), "s", seconds(ds)))
		}
	}
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
