package main

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"time"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/cluster/vmi"
)

// burstPrefix names the burst's VMIs (vmiName).
const burstPrefix = "burst"

// runBurst first creates n bare pods interval apart (the floor: what the
// kubelet does for any pod, same node and CPU request) and deletes them,
// then n launcher-shaped pods the same way (launchershape.go: what the
// kubelet does for a VMI's pod), then creates n paused VMIs interval
// apart; each burst starts on a quiet node (waitQuiet) and measures
// creation → Running per pod and VMI, creation → Scheduled (the controller
// placed the pod) per VMI, the time from the first creation until all are
// Running, and the VMIs' P50 and P95 over each floor's. The VMIs stay.
func runBurst(ctx context.Context, e *env, r *Report, n int, interval, quietWait, reapWait time.Duration) error {
	const sc = "burst"
	shape, err := launcherPodTemplate(ctx, e)
	if err != nil {
		return fmt.Errorf("launcher pod shape: %w", err)
	}
	qemuCPU, err := qemuStartFloor(ctx, qemuFloorStarts, true)
	if err != nil {
		return fmt.Errorf("bare QEMU starts: %w", err)
	}
	qemuReused, err := qemuStartFloor(ctx, qemuFloorStarts, false)
	if err != nil {
		return fmt.Errorf("bare QEMU starts, each quit before the next: %w", err)
	}
	settleBare, err := e.settleBurst(ctx, reapWait, quietWait)
	if err != nil {
		return fmt.Errorf("before the bare pods: %w", err)
	}
	floor, floorUse, err := floorPodBurst(ctx, e, fmt.Sprintf("bare%d", n), n, interval, e.barePod, true)
	if err != nil {
		return fmt.Errorf("bare pods: %w", err)
	}
	floorUse.before = settleBare.quiet
	settleShaped, err := e.settleBurst(ctx, reapWait, quietWait)
	if err != nil {
		return fmt.Errorf("before the launcher-shaped pods: %w", err)
	}
	shaped, shapedUse, err := floorPodBurst(ctx, e, fmt.Sprintf("shaped%d", n), n, interval, launcherShapedPods(shape), true)
	if err != nil {
		return fmt.Errorf("launcher-shaped pods: %w", err)
	}
	shapedUse.before = settleShaped.quiet
	settleVMIs, err := e.settleBurst(ctx, reapWait, quietWait)
	if err != nil {
		return fmt.Errorf("before the VMIs: %w", err)
	}
	syncs0, took0, err := e.agentSyncs(ctx)
	if err != nil {
		return err
	}
	launchers, err := watchPodRunning(ctx, e.kube, vmi.LauncherSelector, vmi.VMIKeyOfPod)
	if err != nil {
		return err
	}
	defer launchers.stop()
	meter, err := e.startStepMeter(ctx, true)
	if err != nil {
		return err
	}
	first := time.Now()
	created, err := createPaused(ctx, e, burstPrefix, 0, n, interval)
	if err != nil {
		_, _ = meter.Stop(ctx)
		return err
	}
	e.log.Info("burst created", "vmis", n, "took", time.Since(first))
	if err := e.vmis.waitCount(ctx, "phase="+string(v1.Running), n, 30*time.Minute); err != nil {
		_, _ = meter.Stop(ctx)
		return err
	}
	vmiUse, err := meter.Stop(ctx)
	if err != nil {
		return err
	}
	vmiUse.before = settleVMIs.quiet
	syncs1, took1, err := e.agentSyncs(ctx)
	if err != nil {
		return err
	}
	all := time.Since(first)
	// The kubelet may report a launcher pod running after the agent
	// wrote its VMI's Running.
	err = poll(ctx, 5*time.Minute, 100*time.Millisecond, fmt.Sprintf("%d launcher pods Running", n), func() (bool, error) {
		return launchers.count() >= n, nil
	})
	if err != nil {
		return err
	}
	var scheduling, scheduled, running, started, afterPod []time.Duration
	var last time.Time
	takenOver := 0
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
		} else {
			takenOver++ // Scheduling → Running (node/agent/prelaunch.go)
		}
		running = append(running, run.Sub(at))
		if pod, ok := launchers.at(benchNamespace + "/" + name); ok {
			afterPod = append(afterPod, run.Sub(pod))
		}
		if run.After(last) {
			last = run
		}
	}
	creation := summarize(sc, fmt.Sprintf("%d VMIs: creation → Running", n), "s", seconds(running))
	creation.KubeVirt = "P50 15–25 s, P95 20–38 s"
	bare := summarize(sc, fmt.Sprintf("%d bare pods: creation → Running (the floor)", n), "s", seconds(floor))
	pod := summarize(sc, fmt.Sprintf("%d launcher-shaped pods, no VMI: creation → Running (the pod's share)", n), "s", seconds(shaped))
	r.add(
		bare,
		pod,
		creation,
		summarize(sc, fmt.Sprintf("%d VMIs: P50 creation → Running ÷ the bare pods'", n), "×", []float64{creation.Median / bare.Median}),
		summarize(sc, fmt.Sprintf("%d VMIs: P95 creation → Running ÷ the bare pods'", n), "×", []float64{creation.P95 / bare.P95}),
		summarize(sc, fmt.Sprintf("%d launcher-shaped pods: P50 creation → Running ÷ the bare pods'", n), "×", []float64{pod.Median / bare.Median}),
		summarize(sc, fmt.Sprintf("%d VMIs: P50 creation → Running ÷ the launcher-shaped pods'", n), "×", []float64{creation.Median / pod.Median}),
		summarize(sc, fmt.Sprintf("%d VMIs: creation → Scheduling (the controller created the launcher pod)", n), "s", seconds(scheduling)),
		summarize(sc, fmt.Sprintf("%d VMIs: share the agent took over, Running before the controller's Scheduled", n), "%",
			[]float64{100 * float64(takenOver) / float64(n)}),
		summarize(sc, fmt.Sprintf("%d VMIs: launcher pod Running → VMI Running, every VMI (what the agent had left once the kubelet reported the pod running; below 0 where it was first)", n), "s", seconds(afterPod)),
		summarize(sc, fmt.Sprintf("%d VMIs: first creation → all Running", n), "s", []float64{last.Sub(first).Seconds()}),
		summarize(sc, fmt.Sprintf("%d VMIs: agent syncs per VMI, first creation → all Running", n), "syncs",
			[]float64{float64(syncs1-syncs0) / float64(n)}),
		summarize(sc, fmt.Sprintf("%d VMIs: agent sync time per VMI (sum of sync durations), first creation → all Running", n), "ms",
			[]float64{float64((took1-took0)/time.Microsecond) / 1000 / float64(n)}),
	)
	if len(scheduled) > 0 {
		// Only the VMIs the agent did not take over have a Scheduled.
		r.add(
			summarize(sc, fmt.Sprintf("%d VMIs the controller scheduled: creation → Scheduled (the kubelet reported the launcher pod running)", n), "s", seconds(scheduled)),
			summarize(sc, fmt.Sprintf("%d VMIs the controller scheduled: Scheduled → Running (what the agent had left to do)", n), "s", seconds(started)),
		)
	}
	steps := startSteps{}
	for _, name := range sortedNames(created) {
		run, _ := e.vmis.first(name, "phase="+string(v1.Running))
		if err := steps.collect(ctx, e, name, created[name], run); err != nil {
			return err
		}
	}
	steps.report(r, sc, fmt.Sprintf("%d VMIs", n))
	reportBurstUse(r, sc, n, interval, floorUse, shapedUse, vmiUse, qemuCPU, qemuReused)
	r.note(sc, "Agent syncs per VMI (%d VMIs): the change of the agent's nodevirt_agent_reconcile_duration_seconds count (and sum) between just before the first creation and all Running, divided by the VMIs; the agent syncs a VMI on its events (informers, the pod's sockets directory, QMP) and on its plan's safety-net polls.", n)
	r.note(sc, "%d VMIs created %v apart on one node, all Running %v after the first creation; before them, in the same run, %d bare pods (one container of the pause image, the same node and CPU request), then %d launcher-shaped pods (the launcher pod the controller rendered for such a VMI, without the VMI), each created %v apart and deleted again. Each burst waited until containerd held none of the step before's dead sandboxes (the kubelet's garbage collection removes them once a minute, all at once), then for a quiet node, every CPU under %.0f%% busy for %v (before the bare pods: %v; before the launcher-shaped pods: %v; before the VMIs: %v; a burst's teardown goes on after its API objects are gone).", n, interval, all.Round(100*time.Millisecond), n, n, interval, quietBusy*100, quietWindow*quietSamples, settleBare, settleShaped, settleVMIs)
	return nil
}

// reportBurstUse reports the node's CPU time and the API requests while
// each of a burst's three steps ran, per object and by component (by
// resource and verb), and the VMIs' CPU per object over its floor: a
// launcher-shaped pod's plus a bare QEMU start's (qemuCPU, this round's,
// each QEMU kept running as a burst's are; qemuReused, each quit before
// the next started).
func reportBurstUse(r *Report, sc string, n int, interval time.Duration, bare, shaped, vmis stepUse, qemuCPU, qemuReused []time.Duration) {
	qemu := summarize(sc, "bare QEMU start: CPU time until its QMP answers, all kept running (the floor of a VMI's own QEMU)", "CPU-s", seconds(qemuCPU))
	r.add(
		qemu,
		summarize(sc, "bare QEMU start: CPU time until its QMP answers, each quit before the next started (reuses the memory the one before freed)", "CPU-s", seconds(qemuReused)),
		summarize(sc, fmt.Sprintf("%d VMIs: node CPU time per object over its floor (a launcher-shaped pod's + a bare QEMU start's)", n), "CPU-s",
			[]float64{vmis.perObject(n) - shaped.perObject(n) - qemu.Median}),
	)
	netVMIs, ok1 := vmis.netPerObject(n)
	netShaped, ok2 := shaped.netPerObject(n)
	if ok1 && ok2 {
		r.add(summarize(sc, fmt.Sprintf("%d VMIs: node CPU time per object over its floor, each step net of the node's background", n), "CPU-s",
			[]float64{netVMIs - netShaped - qemu.Median}))
	}
	r.note(sc, "Net of the node's background: a step's node CPU time less the busy share of all CPUs (/proc/stat) over the quiet windows that ended the wait just before it, times the CPUs and the step's window (first creation → all Running). The VMIs' window is the longest, so without this their per-object figure carries the most of the idle cluster's own work (API server, etcd, kubelet, controllers, agent heartbeats); a step that began on a node that never got quiet has no net figure.")
	r.note(sc, "Bare QEMU start: %d QEMU processes started one after another on the host by this client before each burst round, each with the burst VMI's machine and no devices (%s) and asked query-status on its QMP socket; the CPU time is what the process (every thread, user + system, in /proc's clock ticks as for the bursts) had used when its answer arrived. The floor keeps every QEMU running until the last one answered, as a burst's QEMUs stay, so that each faults in memory no QEMU used just before; a second set of %d, each told to quit before the next starts, reuses the pages the one before freed: the two differ by what the kernel's first touch of fresh memory costs on this host. A VMI's CPU per object cannot go below a launcher-shaped pod's plus the floor.", qemuFloorStarts, strings.Join(qemuFloorArgs, " "), qemuFloorStarts)
	r.note(sc, "The node's CPU per arrival: %d CPUs × %v between creations = %.2f CPU-s. A step whose node CPU time per object is above it queues (its objects arrive faster than the node can start them), one below it does not; where the bare pods are below it and the VMIs above, the VMIs' ratio over the bare pods measures that queue, not a shared bottleneck.",
		runtime.NumCPU(), interval, float64(runtime.NumCPU())*interval.Seconds())
	for _, s := range []struct {
		what string
		u    stepUse
	}{{"bare pods", bare}, {"launcher-shaped pods", shaped}, {"VMIs", vmis}} {
		cpu := s.u.cpu
		writes, gets := s.u.requests.perObject(n)
		if net, ok := s.u.netPerObject(n); ok {
			r.add(summarize(sc, fmt.Sprintf("%d %s: node CPU time per object, net of the node's background", n, s.what), "CPU-s", []float64{net}))
		}
		r.add(
			summarize(sc, fmt.Sprintf("%d %s: node CPU time per object, first creation → all Running", n, s.what), "CPU-s", []float64{s.u.perObject(n)}),
			summarize(sc, fmt.Sprintf("%d %s: API writes per object (VMIs, pods, events), first creation → all Running", n, s.what), "requests", []float64{writes}),
			summarize(sc, fmt.Sprintf("%d %s: API GETs per object (VMIs, pods, events), first creation → all Running", n, s.what), "requests", []float64{gets}),
		)
		r.note(sc, "CPU while the %d %s started (first creation → all Running, %v; the node's %d CPUs had %.1f CPU-s): %.1f CPU-s, of it %s.",
			n, s.what, cpu.wall.Round(100*time.Millisecond), runtime.NumCPU(), cpu.wall.Seconds()*float64(runtime.NumCPU()), cpu.total().Seconds(), cpu)
		r.note(sc, "API requests per object while the %d %s started (kube-apiserver's apiserver_request_total, first creation → all Running, all clients): %s.", n, s.what, s.u.requests.breakdown(n))
	}
}

// burstNotes says what every burst measures.
func burstNotes(r *Report) {
	const sc = "burst"
	r.note(sc, "Where the time goes: creation → Scheduling is the controller, Scheduling → Scheduled the scheduler and the kubelet starting the pod (the launcher pod shape above says how many containers; on this machine the pods' container starts share 2 cores), Scheduled → Running the agent. The agent starts a VMI (network, QEMU, QMP) as soon as its launcher answers in the pod, before the kubelet reported the pod running, and once QEMU runs it takes the VMI over, writing Running (with the node and the Scheduled timestamp) without waiting for the controller's Scheduled (node/agent/prelaunch.go); the share it took over says how often it was first. For the VMIs the controller scheduled first, Scheduled → Running is what was left of the start once the pod was reported running, plus the status write; launcher pod Running → VMI Running is the same for every VMI, from this client's watch of the launcher pods (phase Running as the kubelet reported it), so it is not biased towards the VMIs the agent was last on. The launcher-shaped pods split the VMIs' ratio over the bare pods in two: theirs over the bare pods is what the launcher pod's shape costs the kubelet, containerd and the device plugin; the VMIs' over theirs is the VM's own start (controller, agent, QEMU, the VMI's API writes) on the same cores.")
	r.note(sc, "Agent timeline: the agent's own record of each VMI's start (nodectl timeline), from the VMI's creation by this client: Adopted (the agent took the VMI), NetworkAllocated (intent recorded), NetworkReady (tap, bridge, nftables, DHCP in the pod), Launching (spec sent to the launcher), Attached (QMP connected to the running QEMU), then Running as this client's VMI watch saw it (the agent's status write).")
	r.note(sc, "VMIs: startStrategy Paused, containerDisk (the test guest's disk image), masquerade NIC, 64 MiB guest memory, CPU request 5m (the default 100m per vCPU fits only 16 such pods on this 2-core node).")
}

// burstSettle is how the waits before one burst ended.
type burstSettle struct {
	reaped reaped
	quiet  settle
}

func (s burstSettle) String() string { return s.reaped.String() + ", " + s.quiet.String() }

// settleBurst waits for the runtime to drop the step before's dead
// sandboxes (up to reapWait), then for a quiet node (up to quietWait).
func (e *env) settleBurst(ctx context.Context, reapWait, quietWait time.Duration) (burstSettle, error) {
	rp, err := e.waitReaped(ctx, reapWait)
	if err != nil {
		return burstSettle{}, err
	}
	q, err := waitQuiet(ctx, quietWait)
	if err != nil {
		return burstSettle{}, err
	}
	return burstSettle{reaped: rp, quiet: q}, nil
}

// stepMeter measures one burst step: the node's CPU time and the API
// requests, from its start until Stop.
type stepMeter struct {
	e      *env
	cpu    *cpuMeter
	before apiRequests
}

// stepUse is what one burst step cost.
type stepUse struct {
	cpu      cpuUse
	requests apiRequests
	// before is how the wait for a quiet node ended just before the
	// step: its busy share is the node's background during the step.
	before settle
}

// perObject is the step's node CPU time per object.
func (u stepUse) perObject(n int) float64 {
	if n == 0 {
		return 0
	}
	return u.cpu.total().Seconds() / float64(n)
}

// netPerObject is the step's node CPU time per object less the node's
// background over the step's window (netCPU), and whether there was one
// to take: a wait that did not end quiet measured none.
func (u stepUse) netPerObject(n int) (float64, bool) {
	if !u.before.quiet || n == 0 {
		return 0, false
	}
	return netCPU(u.cpu.total(), u.before.busy, runtime.NumCPU(), u.cpu.wall).Seconds() / float64(n), true
}

// startStepMeter starts a step's window; off, it measures nothing and
// Stop returns an empty stepUse.
func (e *env) startStepMeter(ctx context.Context, on bool) (*stepMeter, error) {
	if !on {
		return nil, nil
	}
	before, err := e.apiServerRequests(ctx)
	if err != nil {
		return nil, err
	}
	return &stepMeter{e: e, cpu: startCPUMeter(true), before: before}, nil
}

// Stop ends the window: the CPU meter first, so that reading the API
// server's metrics is not counted.
func (m *stepMeter) Stop(ctx context.Context) (stepUse, error) {
	if m == nil {
		return stepUse{}, nil
	}
	cpu := m.cpu.Stop()
	after, err := m.e.apiServerRequests(ctx)
	if err != nil {
		return stepUse{}, err
	}
	return stepUse{cpu: cpu, requests: after.since(m.before)}, nil
}
