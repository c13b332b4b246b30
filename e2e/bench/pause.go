package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// runPause pauses and unpauses VMI name cycles times through the node
// API and measures the API's answer and the time until the Paused
// condition appears on (and disappears from) the VMI in the API server.
func runPause(ctx context.Context, e *env, r *Report, name string, cycles int) error {
	const sc = "pause"
	var pauseAPI, pauseSeen, unpauseAPI, unpauseSeen []time.Duration
	defer func() {
		r.add(
			summarize(sc, "pause: node API answer", "ms", millis(pauseAPI)),
			summarize(sc, "pause: until Paused=True in the API server", "ms", millis(pauseSeen)),
			summarize(sc, "unpause: node API answer", "ms", millis(unpauseAPI)),
			summarize(sc, "unpause: until Paused is gone in the API server", "ms", millis(unpauseSeen)),
		)
	}()
	paused := string(v1.VirtualMachineInstancePaused)
	for i := range cycles {
		for _, step := range []struct {
			action    string
			on        bool
			api, seen *[]time.Duration
		}{
			{"pause", true, &pauseAPI, &pauseSeen},
			{"unpause", false, &unpauseAPI, &unpauseSeen},
		} {
			start := time.Now()
			if err := e.vmiAction(ctx, name, step.action); err != nil {
				return fmt.Errorf("cycle %d: %w", i, err)
			}
			answered := time.Now()
			at, err := e.vmis.waitChange(ctx, name, paused, step.on, start, 30*time.Second)
			if err != nil {
				return fmt.Errorf("cycle %d: %w", i, err)
			}
			*step.api = append(*step.api, answered.Sub(start))
			*step.seen = append(*step.seen, at.Sub(start))
		}
	}
	r.note(sc, "%d cycles on the running single VMI, through the node API's public route (PUT .../pause, .../unpause) on the agent's unix socket; \"in the API server\" is when this client's VMI watch saw the condition change.", cycles)
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
