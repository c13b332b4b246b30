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
	pause, qmp := e.pauseCall(t.vmi), e.qmpCall(t.vmi)
	if err := pauseCycles(ctx, e, t.vmi, cycles, 0, [2]pauseStep{
		{do: pause("pause"), on: true, answer: &pauseAPI, seen: &pauseSeen},
		{do: pause("unpause"), answer: &unpauseAPI, seen: &unpauseSeen},
	}); err != nil {
		return err
	}
	if err := pauseCycles(ctx, e, t.vmi, cycles, 0, [2]pauseStep{
		{do: qmp("stop"), on: true, answer: &stopAPI},
		{do: qmp("cont"), answer: &contAPI},
	}); err != nil {
		return fmt.Errorf("floor: %w", err)
	}
	r.note(sc, "%s%d cycles on %s, through the node API's public route (PUT .../pause, .../unpause) on the agent's unix socket; \"in the API server\" is when this client's VMI watch saw the condition change. Floor, in the same run and settled the same way: QMP stop and cont sent through the node API's QMP passthrough on the same socket, which the agent reports as Paused too: the same path without the durable intent.", t.prefix, cycles, t.about)
	return nil
}

// pauseSpacing is the spaced variant of the pause scenario: cycles
// cycles (none: not run) whose calls each wait gap after this client's
// watch saw the call before take effect.
type pauseSpacing struct {
	cycles int
	gap    time.Duration
}

// runPauseSpaced measures the node API's answers as runPause does, but
// each call waits spaced.gap after the watch saw the previous one take
// effect: a settled cycle's next call lands while the node is still
// reacting to the status change the watch just saw (the agent's and the
// controller's syncs of the VMI it updated), which a user's pause, issued
// at a moment of their choosing, rarely meets. The floor is spaced the
// same way.
func runPauseSpaced(ctx context.Context, e *env, r *Report, t pauseTarget, spaced pauseSpacing) error {
	const sc = "pause"
	if spaced.cycles == 0 {
		return nil
	}
	pause, qmp := e.pauseCall(t.vmi), e.qmpCall(t.vmi)
	var pauseAPI, unpauseAPI, stopAPI, contAPI []time.Duration
	what := fmt.Sprintf("%sspaced %v: ", t.prefix, spaced.gap)
	defer func() {
		r.add(
			summarize(sc, what+"pause: node API answer", "ms", millis(pauseAPI)),
			summarize(sc, what+"unpause: node API answer", "ms", millis(unpauseAPI)),
			summarize(sc, what+"floor: QMP stop through the node API passthrough, answer", "ms", millis(stopAPI)),
			summarize(sc, what+"floor: QMP cont through the node API passthrough, answer", "ms", millis(contAPI)),
		)
	}()
	if err := pauseCycles(ctx, e, t.vmi, spaced.cycles, spaced.gap, [2]pauseStep{
		{do: pause("pause"), on: true, answer: &pauseAPI},
		{do: pause("unpause"), answer: &unpauseAPI},
	}); err != nil {
		return fmt.Errorf("spaced: %w", err)
	}
	if err := pauseCycles(ctx, e, t.vmi, spaced.cycles, spaced.gap, [2]pauseStep{
		{do: qmp("stop"), on: true, answer: &stopAPI},
		{do: qmp("cont"), answer: &contAPI},
	}); err != nil {
		return fmt.Errorf("spaced floor: %w", err)
	}
	r.note(sc, "%sspaced: %d more cycles on the same VMI, each call sent %v after this client's watch saw the call before take effect, so that it meets a node done reacting to that status change; the floor, QMP stop and cont through the passthrough, spaced the same way.", t.prefix, spaced.cycles, spaced.gap)
	return nil
}

// runPauseAmong runs the pause scenario repeat times on the first of the
// burst's n VMIs with the others on the node: it unpauses that VMI (the
// burst's start paused) and waits for its guest to boot and the node to
// quiet down first.
func runPauseAmong(ctx context.Context, e *env, r *Report, n, cycles int, spaced pauseSpacing, repeat int, quietWait time.Duration) error {
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
		if err := runPauseSpaced(ctx, e, r, t, spaced); err != nil {
			return err
		}
	}
	return nil
}

// pauseCall returns the call of a node API action (pause, unpause) on vmi.
func (e *env) pauseCall(vmi string) func(action string) func(context.Context) error {
	return func(action string) func(context.Context) error {
		return func(ctx context.Context) error { return e.vmiAction(ctx, vmi, action) }
	}
}

// qmpCall returns the call of a QMP command on vmi through the node API's
// passthrough.
func (e *env) qmpCall(vmi string) func(command string) func(context.Context) error {
	return func(command string) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := e.nodectl.QMP(ctx, benchNamespace+"/"+vmi, api.Command{Execute: command})
			return err
		}
	}
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
// VMI's Paused condition followed in this client's watch, and gap after.
func pauseCycles(ctx context.Context, e *env, name string, cycles int, gap time.Duration, steps [2]pauseStep) error {
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
			if gap > 0 {
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(gap):
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

// pauseSpacing is the spaced variant the settings ask for.
func (s Settings) pauseSpacing() pauseSpacing {
	return pauseSpacing{cycles: s.PauseSpacedCycles, gap: s.PauseGap}
}
