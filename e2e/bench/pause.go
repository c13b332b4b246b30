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

// pauseRun is one measurement of the pause scenario: cycles cycles whose
// calls each start gap after this client's watch saw the call before take
// effect (0: at once, settled).
type pauseRun struct {
	cycles int
	gap    time.Duration
}

// pauseRuns are the measurements the settings ask for: the settled one,
// then the spaced one if any.
func (s Settings) pauseRuns() []pauseRun {
	runs := []pauseRun{{cycles: s.PauseCycles}}
	if s.PauseSpacedCycles > 0 {
		runs = append(runs, pauseRun{cycles: s.PauseSpacedCycles, gap: s.PauseGap})
	}
	return runs
}

// runPause pauses and unpauses the target VMI run.cycles times through the
// node API and measures the API's answer and, settled (no gap), the time
// until the Paused condition appears on (and disappears from) the VMI in
// the API server. In the same run it measures the floor the same way: QMP
// stop and cont through the node API's QMP passthrough (the debug route
// on the same socket: HTTP, resolving the VMI, the agent's QMP connection,
// QEMU stopping the vCPUs), which the agent reports as Paused too, without
// the durable intent a pause writes first.
//
// Spaced (a gap), each call waits run.gap after the watch saw the one
// before take effect: a settled cycle's next call lands while the node is
// still reacting to the status change the watch just saw (the agent's and
// the controller's syncs of the VMI it updated), which a user's pause,
// issued at a moment of their choosing, rarely meets.
func runPause(ctx context.Context, e *env, r *Report, t pauseTarget, run pauseRun) error {
	const sc = "pause"
	prefix := t.prefix
	if run.gap > 0 {
		prefix += fmt.Sprintf("spaced %v: ", run.gap)
	}
	var pauseAPI, pauseSeen, unpauseAPI, unpauseSeen, stopAPI, contAPI []time.Duration
	defer func() {
		figures := []Figure{summarize(sc, prefix+"pause: node API answer", "ms", millis(pauseAPI))}
		if run.gap == 0 {
			figures = append(figures, summarize(sc, prefix+"pause: until Paused=True in the API server", "ms", millis(pauseSeen)))
		}
		figures = append(figures, summarize(sc, prefix+"unpause: node API answer", "ms", millis(unpauseAPI)))
		if run.gap == 0 {
			figures = append(figures, summarize(sc, prefix+"unpause: until Paused is gone in the API server", "ms", millis(unpauseSeen)))
		}
		r.add(append(figures,
			summarize(sc, prefix+"floor: QMP stop through the node API passthrough, answer", "ms", millis(stopAPI)),
			summarize(sc, prefix+"floor: QMP cont through the node API passthrough, answer", "ms", millis(contAPI)),
		)...)
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
	if err := pauseCycles(ctx, e, t.vmi, run, [2]pauseStep{
		{do: pause("pause"), on: true, answer: &pauseAPI, seen: &pauseSeen},
		{do: pause("unpause"), answer: &unpauseAPI, seen: &unpauseSeen},
	}); err != nil {
		return err
	}
	if err := pauseCycles(ctx, e, t.vmi, run, [2]pauseStep{
		{do: qmp("stop"), on: true, answer: &stopAPI},
		{do: qmp("cont"), answer: &contAPI},
	}); err != nil {
		return fmt.Errorf("floor: %w", err)
	}
	if run.gap > 0 {
		r.note(sc, "%sspaced: %d more cycles on the same VMI, each call sent %v after this client's watch saw the call before take effect, so that it meets a node done reacting to that status change; the floor, QMP stop and cont through the passthrough, spaced the same way.", t.prefix, run.cycles, run.gap)
		return nil
	}
	r.note(sc, "%s%d cycles on %s, through the node API's public route (PUT .../pause, .../unpause) on the agent's unix socket; \"in the API server\" is when this client's VMI watch saw the condition change. Floor, in the same run and settled the same way: QMP stop and cont sent through the node API's QMP passthrough on the same socket, which the agent reports as Paused too: the same path without the durable intent.", t.prefix, run.cycles, t.about)
	return nil
}

// runPauseAmong runs the pause scenario repeat times on the first of the
// burst's n VMIs with the others on the node: it unpauses that VMI (the
// burst's start paused) and waits for its guest to boot and the node to
// quiet down first.
func runPauseAmong(ctx context.Context, e *env, r *Report, n int, runs []pauseRun, repeat int, quietWait time.Duration) error {
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
		for _, run := range runs {
			if err := runPause(ctx, e, r, t, run); err != nil {
				return err
			}
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

// pauseCycles runs run.cycles cycles of steps, each settled: the next
// starts once the VMI's Paused condition followed in this client's watch,
// and run.gap after.
func pauseCycles(ctx context.Context, e *env, name string, run pauseRun, steps [2]pauseStep) error {
	paused := string(v1.VirtualMachineInstancePaused)
	for i := range run.cycles {
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
			if run.gap > 0 {
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(run.gap):
				}
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
