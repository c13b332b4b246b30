package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// readyMarker is what the test guest prints on its console once init runs.
const readyMarker = "NODEVIRT-GUEST-READY"

// runSingle boots one VMI at a time on the idle node, runs times, and
// measures creation → Running, → the guest's ready marker, →
// AgentConnected; before each VMI a bare pod's creation → Running is the
// floor. The bare pod and the VMI each start on a quiet node (waitQuiet):
// the teardown of what ran before is not theirs to pay. It leaves the last
// VMI running and returns its name.
func runSingle(ctx context.Context, e *env, r *Report, runs int, quietWait time.Duration) (string, error) {
	const sc = "single"
	var floor, overFloor, running, ready, agent, scheduling []time.Duration
	takenOver := 0 // Scheduling → Running without the controller's Scheduled
	steps := startSteps{}
	defer func() {
		r.add(
			summarize(sc, "bare pod: creation → Running (the floor)", "s", seconds(floor)),
			summarize(sc, "creation → Running", "s", seconds(running)),
			summarize(sc, "creation → Running minus the bare pod's just before", "s", seconds(overFloor)),
			summarize(sc, "creation → guest ready marker on the console", "s", seconds(ready)),
			summarize(sc, "creation → AgentConnected", "s", seconds(agent)),
			summarize(sc, "creation → Scheduling (the controller created the launcher pod)", "s", seconds(scheduling)),
		)
		if len(running) > 0 {
			r.add(summarize(sc, "share the agent took over, Running before the controller's Scheduled", "%",
				[]float64{100 * float64(takenOver) / float64(len(running))}))
		}
		steps.report(r, sc, "VMI")
	}()
	var name string
	notQuiet := 0
	for i := range runs {
		if name != "" {
			if err := e.deleteVMIs(ctx); err != nil {
				return "", err
			}
			e.vmis.forget()
		}
		if st, err := waitQuiet(ctx, quietWait); err != nil {
			return "", fmt.Errorf("before the bare pod: %w", err)
		} else if !st.quiet {
			notQuiet++
		}
		bare, _, err := floorPodBurst(ctx, e, fmt.Sprintf("single-bare-%d", i), 1, 0, e.barePod, false)
		if err != nil {
			return "", fmt.Errorf("bare pod: %w", err)
		}
		if st, err := waitQuiet(ctx, quietWait); err != nil {
			return "", fmt.Errorf("before the VMI: %w", err)
		} else if !st.quiet {
			notQuiet++
		}
		name = fmt.Sprintf("single-%d", i)
		vmi, err := newVMI(bootVMI, name)
		if err != nil {
			return "", err
		}
		start, err := e.createVMI(ctx, vmi)
		if err != nil {
			return "", err
		}
		at, err := e.vmis.waitFirst(ctx, name, "phase="+string(v1.Running), 3*time.Minute)
		if err != nil {
			return "", err
		}
		running = append(running, at.Sub(start))
		floor, overFloor = append(floor, bare[0]), append(overFloor, at.Sub(start)-bare[0])
		// A phase the writer skipped is not there to see.
		if sg, ok := e.vmis.first(name, "phase="+string(v1.Scheduling)); ok {
			scheduling = append(scheduling, sg.Sub(start))
		}
		if _, ok := e.vmis.first(name, "phase="+string(v1.Scheduled)); !ok {
			takenOver++ // node/agent/prelaunch.go
		}
		if err := steps.collect(ctx, e, name, start, at); err != nil {
			return "", err
		}
		if at, err = e.waitConsole(ctx, name, readyMarker, 2*time.Minute); err != nil {
			return "", err
		}
		ready = append(ready, at.Sub(start))
		if at, err = e.vmis.waitFirst(ctx, name, string(v1.VirtualMachineInstanceAgentConnected), 2*time.Minute); err != nil {
			return "", err
		}
		agent = append(agent, at.Sub(start))
		e.log.Info("single VMI", "run", i, "running", running[i], "ready", ready[i], "agentConnected", agent[i])
	}
	r.note(sc, "The VMI of deploy/examples/vm.yaml (kernelBoot of the test guest, 128 MiB, masquerade NIC, cloud-init), created and deleted %d times; the guest boots under TCG. The bare pod and the VMI each waited for a quiet node (every CPU under %.0f%% busy for %v, up to %v); %d of %d waits ended without one.", runs, quietBusy*100, quietWindow*quietSamples, quietWait, notQuiet, 2*runs)
	r.note(sc, "Where a start goes: creation → Scheduling is the controller, then the scheduler and the kubelet start the launcher pod; the agent starts QEMU as soon as the launcher answers and, once QEMU runs, writes Running itself unless the controller's Scheduled (after the kubelet's report that the pod runs) came first (the share it took over); the agent timeline (as in the burst) starts when the agent took the VMI, which it does as soon as the launcher answers in the pod, and ends when this client's VMI watch saw Running.")
	return name, nil
}

// waitConsole polls the VMI's serial log on the host (the launcher pod's
// sockets emptyDir) until it holds marker and returns when it was seen.
func (e *env) waitConsole(ctx context.Context, name, marker string, timeout time.Duration) (time.Time, error) {
	vmi, err := e.virt.KubevirtV1().VirtualMachineInstances(benchNamespace).Get(ctx, name, getOpts)
	if err != nil {
		return time.Time{}, fmt.Errorf("VMI %s: %w", name, err)
	}
	pod, err := e.launcherPod(ctx, string(vmi.UID))
	if err != nil {
		return time.Time{}, err
	}
	log := filepath.Join(e.emptyDir(string(pod.UID), "sockets"), "serial.log")
	var at time.Time
	err = poll(ctx, timeout, 20*time.Millisecond, fmt.Sprintf("%s on VMI %s's console", marker, name), func() (bool, error) {
		b, err := os.ReadFile(log)
		if err != nil {
			return false, err
		}
		at = time.Now()
		return bytes.Contains(b, []byte(marker)), nil
	})
	return at, err
}
