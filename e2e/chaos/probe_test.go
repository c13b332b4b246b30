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
			h.probe(ctx, name, b.pod.Status.PodIP)
		}()
	}
	for range h.residents {
		<-done
	}
}

// probeClient GETs without keep-alive (each probe a new connection
// through the masquerade), a second at most.
var probeClient = http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: time.Second}

// httpOK GETs port 80 of a guest at pod IP ip once.
func httpOK(ctx context.Context, ip string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(ip, "80")+"/", nil)
	if err != nil {
		return err
	}
	resp, err := probeClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return nil
}

func (h *harness) probe(ctx context.Context, name, ip string) {
	var down time.Time // when the current outage began; zero: answering
	for ctx.Err() == nil {
		err := httpOK(ctx, ip)
		ok := err == nil
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
