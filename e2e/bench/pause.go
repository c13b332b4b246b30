package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/node/api"
)

// pauseTarget is the VMI the pause scenario cycles and how the report
// names its figures.
type pauseTarget struct {
	vmi    string
	prefix string // of every figure's name
	about  string // the VMI, for the note
}

// runPause pauses and unpauses the target VMI cycles times through the
// node API and measures the API's answer and the time until the Paused
// condition appears on (and disappears from) the VMI in the API server.
// In the same run it measures the floor the same way: QMP stop and cont
// through the node API's QMP passthrough (the debug route on the same
// socket: HTTP, resolving the VMI, the agent's QMP connection, QEMU
// stopping the vCPUs), which the agent reports as Paused too, without the
// durable intent a pause writes first.
func runPause(ctx context.Context, e *env, r *Report, t pauseTarget, cycles int) error {
	const sc = "pause"
	var pauseAPI, pauseSeen, unpauseAPI, unpauseSeen, stopAPI, contAPI []time.Duration
	defer func() {
		r.add(
			summarize(sc, t.prefix+"pause: node API answer", "ms", millis(pauseAPI)),
			summarize(sc, t.prefix+"pause: until Paused=True in the API server", "ms", millis(pauseSeen)),
			summarize(sc, t.prefix+"unpause: node API answer", "ms", millis(unpauseAPI)),
			summarize(sc, t.prefix+"unpause: until Paused is gone in the API server", "ms", millis(unpauseSeen)),
			summarize(sc, t.prefix+"floor: QMP stop through the node API passthrough, answer", "ms", millis(stopAPI)),
			summarize(sc, t.prefix+"floor: QMP cont through the node API passthrough, answer", "ms", millis(contAPI)),
		)
	}()
	pause := func(action string) func(context.Context) error {
		return func(ctx context.Context) error { return e.vmiAction(ctx, t.vmi, action) }
	}
	qmp := func(command string) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := e.nodectl.QMP(ctx, benchNamespace+"/"+t.vmi, api.Command{Execute: command})
			return err
		}
	}
	if err := pauseCycles(ctx, e, t.vmi, cycles, [2]pauseStep{
		{do: pause("pause"), on: true, answer: &pauseAPI, seen: &pauseSeen},
		{do: pause("unpause"), answer: &unpauseAPI, seen: &unpauseSeen},
	}); err != nil {
		return err
	}
	if err := pauseCycles(ctx, e, t.vmi, cycles, [2]pauseStep{
		{do: qmp("stop"), on: true, answer: &stopAPI},
		{do: qmp("cont"), answer: &contAPI},
	}); err != nil {
		return fmt.Errorf("floor: %w", err)
	}
	r.note(sc, "%s%d cycles on %s, through the node API's public route (PUT .../pause, .../unpause) on the agent's unix socket; \"in the API server\" is when this client's VMI watch saw the condition change. Floor, in the same run and settled the same way: QMP stop and cont sent through the node API's QMP passthrough on the same socket, which the agent reports as Paused too: the same path without the durable intent.", t.prefix, cycles, t.about)
	return nil
}

// runPauseAmong runs the pause scenario repeat times on the first of the
// burst's n VMIs with the others on the node: it unpauses that VMI (the
// burst's start paused) and waits for its guest to boot and the node to
// quiet down first.
func runPauseAmong(ctx context.Context, e *env, r *Report, n, cycles, repeat int, quietWait time.Duration) error {
	name := vmiName(burstPrefix, 0)
	start := time.Now()
	if err := e.vmiAction(ctx, name, "unpause"); err != nil {
		return err
	}
	if _, err := e.vmis.waitChange(ctx, name, string(v1.VirtualMachineInstancePaused), false, start, 30*time.Second); err != nil {
		return err
	}
	settle, err := waitQuiet(ctx, quietWait)
	if err != nil {
		return err
	}
	t := pauseTarget{
		vmi:    name,
		prefix: fmt.Sprintf("%d VMs on the node: ", n),
		about:  fmt.Sprintf("the first of the burst's %d VMIs, unpaused once before and its guest left to boot (before the cycles: %v), with the other %d on the node, paused", n, settle, n-1),
	}
	for range repeat {
		if err := runPause(ctx, e, r, t, cycles); err != nil {
			return err
		}
	}
	return nil
}

// pauseStep is one half of a pause cycle: the call, whether it pauses,
// and where its answer time and (when seen is not nil) the time until the
// VMI's Paused condition followed are appended.
type pauseStep struct {
	do           func(context.Context) error
	on           bool
	answer, seen *[]time.Duration
}

// pauseCycles runs cycles of steps, each settled: the next starts once the
// VMI's Paused condition followed in this client's watch.
func pauseCycles(ctx context.Context, e *env, name string, cycles int, steps [2]pauseStep) error {
	paused := string(v1.VirtualMachineInstancePaused)
	for i := range cycles {
		for _, step := range steps {
			start := time.Now()
			if err := step.do(ctx); err != nil {
				return fmt.Errorf("cycle %d: %w", i, err)
			}
			answered := time.Now()
			at, err := e.vmis.waitChange(ctx, name, paused, step.on, start, 30*time.Second)
			if err != nil {
				return fmt.Errorf("cycle %d: %w", i, err)
			}
			*step.answer = append(*step.answer, answered.Sub(start))
			if step.seen != nil {
				*step.seen = append(*step.seen, at.Sub(start))
			}
		}
	}
	return nil
}

// vmiAction calls the node API's PUT /v1/namespaces/{ns}/virtualmachineinstances/{name}/{action}.
func (e *env) vmiAction(ctx context.Context, name, action string) error {
	url := fmt.Sprintf("http://node/v1/namespaces/%s/virtualmachineinstances/%s/%s", benchNamespace, name, action)
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, url, nil)
	if err != nil {
		return err
	}
	resp, err := e.nodeAPI.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", action, name, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: HTTP %d: %s", action, name, resp.StatusCode, body)
	}
	return nil
}
