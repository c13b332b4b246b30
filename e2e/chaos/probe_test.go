package chaos

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"
)

// maxOutage is the longest a resident guest may stop answering HTTP: no
// fault aims at it, so its clients must not notice any (a probe that times
// out under load is one second).
const maxOutage = 5 * time.Second

// probeResidents GETs port 80 of every resident's guest (through its pod
// IP and masquerade) every probeEvery until ctx ends, and records the
// probes, the failures and each resident's longest outage.
func (h *harness) probeResidents(ctx context.Context) {
	done := make(chan struct{})
	for name, b := range h.residents {
		go func() {
			defer func() { done <- struct{}{} }()
			h.probe(ctx, name, "http://"+net.JoinHostPort(b.pod.Status.PodIP, "80")+"/")
		}()
	}
	for range h.residents {
		<-done
	}
}

func (h *harness) probe(ctx context.Context, name, url string) {
	client := http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: time.Second}
	var down time.Time // when the current outage began; zero: answering
	for ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := client.Do(req)
		ok := err == nil && resp.StatusCode == http.StatusOK
		if err == nil {
			resp.Body.Close()
		}
		now := time.Now()
		if ctx.Err() != nil {
			return
		}
		h.mu.Lock()
		h.report.Probes++
		if !ok {
			h.report.ProbeFailures++
			if down.IsZero() {
				down = now
			}
		}
		if out := now.Sub(down); !down.IsZero() && out > h.report.GuestOutageMax {
			h.report.GuestOutageMax = out
		}
		h.mu.Unlock()
		if !down.IsZero() && now.Sub(down) > maxOutage {
			h.violate(fmt.Sprintf("resident %s: its guest stopped answering HTTP at %v (%v)", name, down.Sub(h.start).Round(time.Second), err))
		}
		if ok {
			down = time.Time{}
		}
		select {
		case <-ctx.Done():
		case <-time.After(probeEvery):
		}
	}
}
