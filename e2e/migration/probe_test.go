package migration

import (
	"context"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"
)

// prober measures a guest's service downtime as its clients see it: it
// GETs port 80 at every address it is given, each every probeInterval,
// and records when each successful answer arrived. The longest gap
// between successive answers (from any address) is the downtime: during a
// migration the source pod's address stops answering and the target's
// starts.
type prober struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu    sync.Mutex
	ips   map[string]bool
	ok    []time.Time
	fails int
}

// probeInterval is the pause between two probes of one address.
const probeInterval = 10 * time.Millisecond

func newProber() *prober {
	ctx, cancel := context.WithCancel(context.Background())
	return &prober{ctx: ctx, cancel: cancel, ips: map[string]bool{}}
}

// add starts probing ip (no-op when empty or already probed).
func (p *prober) add(ip string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if ip == "" || p.ips[ip] {
		return
	}
	p.ips[ip] = true
	p.wg.Add(1)
	go p.loop("http://" + net.JoinHostPort(ip, "80") + "/")
}

func (p *prober) loop(url string) {
	defer p.wg.Done()
	client := http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 500 * time.Millisecond}
	for p.ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(p.ctx, http.MethodGet, url, nil)
		resp, err := client.Do(req)
		now := time.Now()
		if err == nil {
			resp.Body.Close()
		}
		p.mu.Lock()
		if err == nil && resp.StatusCode == http.StatusOK {
			p.ok = append(p.ok, now)
		} else if p.ctx.Err() == nil {
			p.fails++
		}
		p.mu.Unlock()
		select {
		case <-p.ctx.Done():
		case <-time.After(probeInterval):
		}
	}
}

// stop ends the probes and returns the longest gap between two successful
// answers, when it began, and the counts of answers and failed probes.
func (p *prober) stop() (gap time.Duration, at time.Time, answers, fails int) {
	p.cancel()
	p.wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	ok := slices.Clone(p.ok)
	slices.SortFunc(ok, func(a, b time.Time) int { return a.Compare(b) })
	for i := 1; i < len(ok); i++ {
		if d := ok[i].Sub(ok[i-1]); d > gap {
			gap, at = d, ok[i-1]
		}
	}
	return gap, at, len(ok), p.fails
}
