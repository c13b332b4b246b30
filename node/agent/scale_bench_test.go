package agent_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/hack/testenv"
	"github.com/nodevirt/nodevirt/node/metrics"
)

// TestScale_BurstAndRestart measures the agent with many VMs (env
// NODEVIRT_BENCH_VMS, default 100; startStrategy Paused, masquerade NIC,
// as e2e/bench's burst): how long each VMI takes from Scheduled (its
// launcher pod running) to Running when they arrive together (Scheduled
// NODEVIRT_BENCH_INTERVAL apart, default 100ms; 0: all at once), then how long a SIGKILLed agent's successor takes to hold a
// QMP connection to every QEMU again (nodevirt_agent_domains_connected),
// and that no QEMU was replaced. It reports; it does not assert timings.
// It runs only with NODEVIRT_BENCH=1 (make bench-agent-scale).
func TestScale_BurstAndRestart(t *testing.T) {
	if os.Getenv("NODEVIRT_BENCH") != "1" {
		t.Skip("a measurement with many QEMUs: set NODEVIRT_BENCH=1 (make bench-agent-scale)")
	}
	n := 100
	if s := os.Getenv("NODEVIRT_BENCH_VMS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			t.Fatalf("NODEVIRT_BENCH_VMS: %v", err)
		}
	}
	interval := 100 * time.Millisecond
	if s := os.Getenv("NODEVIRT_BENCH_INTERVAL"); s != "" {
		var err error
		if interval, err = time.ParseDuration(s); err != nil {
			t.Fatalf("NODEVIRT_BENCH_INTERVAL: %v", err)
		}
	}
	h := newHarness(t)
	h.startAgent(t)
	running := watchRunning(t, h)

	// Every launcher pod first, then the VMIs Scheduled interval apart,
	// each from its own goroutine so that a slow API call does not hold
	// the next one back.
	vms := make([]*vm, n)
	for i := range vms {
		vms[i] = h.prepareVM(t, fmt.Sprintf("burst-%03d", i), vmOpts{paused: true, binding: "masquerade"})
		vms[i].serial.stop()
	}
	first := time.Now()
	errs := make(chan error, n)
	for _, v := range vms {
		go func() { errs <- v.setScheduled() }()
		time.Sleep(interval)
	}
	for range vms {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	created := time.Since(first)
	var lat []time.Duration
	for deadline := time.Now().Add(5 * time.Minute); ; {
		lat = lat[:0]
		var waiting []string
		for _, v := range vms {
			if at, ok := running.at(v.name); ok {
				lat = append(lat, at.Sub(v.created))
			} else {
				waiting = append(waiting, v.name)
			}
		}
		if len(waiting) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d VMIs not Running after 5m: %v", len(waiting), waiting)
		}
		time.Sleep(50 * time.Millisecond)
	}
	last := slices.Max(lat)
	for _, v := range vms {
		if at, _ := running.at(v.name); at.Sub(first) > last {
			last = at.Sub(first)
		}
	}
	t.Logf("burst of %d VMIs (scheduled over %v): pod running → VMI Running p50 %v, p90 %v, max %v; first creation → all Running %v; agent CPU %v",
		n, created.Round(time.Millisecond), pct(lat, 50), pct(lat, 90), slices.Max(lat).Round(time.Millisecond),
		last.Round(time.Millisecond), cpuTime(t, h.agentPID()))

	qemus := map[string]int{}
	var qemuCPU time.Duration
	for _, v := range vms {
		qemus[v.name] = v.qemuPID(t)
		qemuCPU += cpuTime(t, qemus[v.name])
	}
	t.Logf("CPU of the %d QEMUs so far: %v", n, qemuCPU)
	h.killAgent()
	off := h.agentLogSize()
	start := h.startAgent(t)
	// /readyz is polled, not /metrics: a scrape with 100 VMs costs the
	// agent more CPU than the re-adoption it would measure.
	for deadline := start.Add(2 * time.Minute); !h.readyz(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("/readyz of the restarted agent: not 200 after 2m")
		}
	}
	ready := time.Since(start)
	readyCPU := cpuTime(t, h.agentPID())
	testenv.Eventually(t, 2*time.Minute, fmt.Sprintf("%d domains connected after the restart", n), func() bool {
		fams, err := h.tryScrape()
		if err != nil {
			return false // not serving yet
		}
		connected, _ := sample(fams, "nodevirt_agent_domains_connected", map[string]string{"node": testNode})
		return int(connected) >= n
	})
	// The last attach in the new agent's log, not when the poll above
	// noticed (its interval grows).
	var adopted time.Time
	for _, l := range h.agentLogLines(off, "domain attached") {
		if at, err := time.Parse(time.RFC3339Nano, fmt.Sprint(l["time"])); err == nil && at.After(adopted) {
			adopted = at
		}
	}
	t.Logf("agent restart with %d VMs: new process → every VM re-adopted %v, → /readyz 200 seen %v; agent CPU by then %v",
		n, adopted.Sub(start).Round(time.Millisecond), ready.Round(time.Millisecond), readyCPU)
	for _, v := range vms {
		if pid := v.qemuPID(t); pid != qemus[v.name] {
			t.Errorf("VM %s: QEMU pid %d → %d across the agent restart", v.name, qemus[v.name], pid)
		}
	}
}

// runningTimes records when a VMI watch first saw each VMI Running.
type runningTimes struct {
	mu   sync.Mutex
	seen map[string]time.Time
}

func (r *runningTimes) at(name string) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	at, ok := r.seen[name]
	return at, ok
}

// watchRunning watches the harness's namespace until the test ends,
// resuming from the last resource version when the API server ends the
// watch (a VMI that turned Running in between is timed by a list).
func watchRunning(t *testing.T, h *harness) *runningTimes {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &runningTimes{seen: map[string]time.Time{}}
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	vmis := h.virt.KubevirtV1().VirtualMachineInstances(h.ns)
	see := func(vmi *v1.VirtualMachineInstance) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if _, ok := r.seen[vmi.Name]; !ok && vmi.Status.Phase == v1.Running {
			r.seen[vmi.Name] = time.Now()
		}
	}
	go func() {
		defer close(done)
		rv := ""
		retry := func() {
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
		for ctx.Err() == nil {
			if rv == "" {
				list, err := vmis.List(ctx, metav1.ListOptions{})
				if err != nil {
					retry()
					continue
				}
				for i := range list.Items {
					see(&list.Items[i])
				}
				rv = list.ResourceVersion
			}
			w, err := vmis.Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
			if err != nil {
				rv = ""
				retry()
				continue
			}
			for ev := range w.ResultChan() {
				vmi, ok := ev.Object.(*v1.VirtualMachineInstance)
				if !ok { // an error event (e.g. resource version too old)
					rv = ""
					break
				}
				rv = vmi.ResourceVersion
				see(vmi)
			}
			w.Stop()
		}
	}()
	return r
}

// tryScrape scrapes the agent's /metrics; an agent not serving yet is an
// error.
func (h *harness) tryScrape() (map[string]*dto.MetricFamily, error) {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + h.metricsAddr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape: %s", resp.Status)
	}
	var p expfmt.TextParser
	return p.TextToMetricFamilies(resp.Body)
}

// cpuTime is the user and system CPU time process pid used so far.
func cpuTime(t *testing.T, pid int) time.Duration {
	t.Helper()
	cpu, err := metrics.ProcessCPU("/proc", pid)
	if err != nil {
		t.Fatal(err)
	}
	return time.Duration(cpu.UsageSeconds * float64(time.Second))
}
