package main

import (
	"context"
	"fmt"
	"time"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// runBurst creates n paused VMIs interval apart and measures creation →
// Scheduled (the controller placed the pod) and → Running per VMI, and
// the time from the first creation until all are Running.
func runBurst(ctx context.Context, e *env, r *Report, n int, interval time.Duration) error {
	const sc = "burst"
	first := time.Now()
	created, err := createPaused(ctx, e, "burst", 0, n, interval)
	if err != nil {
		return err
	}
	e.log.Info("burst created", "vmis", n, "took", time.Since(first))
	if err := e.vmis.waitCount(ctx, "phase="+string(v1.Running), n, 30*time.Minute); err != nil {
		return err
	}
	all := time.Since(first)
	var scheduling, scheduled, running, started []time.Duration
	var last time.Time
	for name, at := range created {
		run, ok := e.vmis.first(name, "phase="+string(v1.Running))
		if !ok {
			return fmt.Errorf("VMI %s: Running not observed", name)
		}
		// The watch sees every write, but a phase the writer skipped is
		// not there to see.
		if sg, ok := e.vmis.first(name, "phase="+string(v1.Scheduling)); ok {
			scheduling = append(scheduling, sg.Sub(at))
		}
		if s, ok := e.vmis.first(name, "phase="+string(v1.Scheduled)); ok {
			scheduled = append(scheduled, s.Sub(at))
			started = append(started, run.Sub(s))
		}
		running = append(running, run.Sub(at))
		if run.After(last) {
			last = run
		}
	}
	creation := summarize(sc, "creation → Running", "s", seconds(running))
	creation.KubeVirt = "P50 15–25 s, P95 20–38 s"
	r.add(
		creation,
		summarize(sc, "creation → Scheduling (the controller created the launcher pod)", "s", seconds(scheduling)),
		summarize(sc, "creation → Scheduled (the launcher pod runs on the node)", "s", seconds(scheduled)),
		summarize(sc, "Scheduled → Running (the agent starts QEMU)", "s", seconds(started)),
		summarize(sc, fmt.Sprintf("first creation → all %d Running", n), "s", []float64{last.Sub(first).Seconds()}),
	)
	r.note(sc, "Where the time goes: creation → Scheduling is the controller, Scheduling → Scheduled the scheduler and the kubelet starting the pod (sandbox, an init container and two containers; on this machine 100 pods' container starts share 2 cores), Scheduled → Running the agent (network, QEMU, QMP).")
	r.note(sc, "%d VMIs, startStrategy Paused, containerDisk (the test guest's disk image), masquerade NIC, 64 MiB guest memory, CPU request 5m (the default 100m per vCPU fits only 16 such pods on this 2-core node), created %v apart on one node; all Running %v after the first creation.", n, interval, all.Round(100*time.Millisecond))
	return nil
}
