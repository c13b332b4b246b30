package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/e2e/localcluster"
	"github.com/nodevirt/nodevirt/node/agent"
	"github.com/nodevirt/nodevirt/node/api"
)

// runRestart SIGKILLs the agent process while the n VMIs of the benchmark
// namespace run and measures how long the restarted agent takes to hold a
// QMP connection to every VM again (nodevirt_agent_domains_connected), and
// how many VMs were disturbed: QEMU replaced, a phase or condition change
// seen in the API server, or QEMU no longer in the run state it had.
func runRestart(ctx context.Context, e *env, r *Report, n, run int, quietWait time.Duration) error {
	const sc = "restart"
	vmis, err := e.virt.KubevirtV1().VirtualMachineInstances(benchNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list VMIs: %w", err)
	}
	if len(vmis.Items) != n {
		return fmt.Errorf("%d VMIs in %s, want %d", len(vmis.Items), benchNamespace, n)
	}
	type before struct {
		qemu     int
		runState string
	}
	was := map[string]before{}
	var sockets []string
	for i := range vmis.Items {
		vmi := &vmis.Items[i]
		pod, err := e.launcherPod(ctx, string(vmi.UID))
		if err != nil {
			return err
		}
		sockets = append(sockets, e.qmpSocket(string(pod.UID)))
		pid, err := e.qemuPid(ctx, vmi)
		if err != nil {
			return err
		}
		st, err := e.qmpStatus(ctx, vmi.Name)
		if err != nil {
			return err
		}
		was[vmi.Name] = before{pid, st}
	}
	pod, err := e.agentPod(ctx)
	if err != nil {
		return err
	}
	old, err := localcluster.PodProcess(string(pod.UID), agentProcess)
	if err != nil {
		return err
	}

	// Like the bursts, the kill waits for a quiet node: right after the
	// burst or the overhead scrapes, the kubelet and containerd are still
	// busy with the burst's pods, and the new agent would share the cores
	// with them.
	st, err := waitQuiet(ctx, quietWait)
	if err != nil {
		return fmt.Errorf("before the SIGKILL: %w", err)
	}
	r.note(sc, "Run %d: before the SIGKILL, %s.", run, st)
	killed := time.Now()
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		return fmt.Errorf("SIGKILL agent pid %d: %w", old, err)
	}
	e.log.Info("agent SIGKILLed", "pid", old, "vms", n)
	// The floor runs while no agent holds the QMP sockets, and counts only
	// if it ended before the new process was seen: once that process
	// attaches, QEMU would keep the floor's connections waiting.
	floorCtx, stopFloor := context.WithCancel(ctx)
	defer stopFloor()
	type floorRun struct {
		took time.Duration
		end  time.Time
		err  error
	}
	floorDone := make(chan floorRun, 1)
	go func() {
		took, err := qmpAttachFloor(floorCtx, sockets)
		floorDone <- floorRun{took, time.Now(), err}
	}()
	var started, healthy, ready, adopted time.Time
	if err := poll(ctx, 5*time.Minute, 20*time.Millisecond, "a new agent process", func() (bool, error) {
		pid, err := localcluster.PodProcess(string(pod.UID), agentProcess)
		started = time.Now()
		return err == nil && pid != old, err
	}); err != nil {
		return err
	}
	stopFloor()
	floor := <-floorDone
	var floorSecs []float64
	switch {
	case floor.err == nil && floor.end.Before(started):
		floorSecs = []float64{floor.took.Seconds()}
	case floor.err == nil || floorCtx.Err() != nil:
		r.note(sc, "QMP attach floor not counted in one run: the new agent process came %v after the SIGKILL, before the floor ended", started.Sub(killed).Round(time.Millisecond))
	default:
		return fmt.Errorf("QMP attach floor: %w", floor.err)
	}
	ip := pod.Status.PodIP
	if err := poll(ctx, 2*time.Minute, 20*time.Millisecond, "the new agent's /healthz", func() (bool, error) {
		healthy = time.Now()
		return e.probe(ctx, ip, "/healthz")
	}); err != nil {
		return err
	}
	// /readyz is cheap, unlike a /metrics scrape (~0.3 s with 100 VMs,
	// most of it each VM's statistics): it is polled, and the QMP
	// connections are counted once it answers.
	if err := poll(ctx, 5*time.Minute, 20*time.Millisecond, "the new agent's /readyz", func() (bool, error) {
		ok, err := e.probe(ctx, ip, "/readyz")
		ready = time.Now()
		return ok, err
	}); err != nil {
		return err
	}
	// One scrape right after /readyz counts the QMP connections; /metrics
	// is polled only if some are missing then.
	connectedAtReady, err := e.connectedDomains(ctx, ip)
	if err != nil {
		connectedAtReady = -1
	}
	adopted = ready
	if int(connectedAtReady) < n {
		if err := poll(ctx, 5*time.Minute, 100*time.Millisecond, fmt.Sprintf("%d VMs re-adopted", n), func() (bool, error) {
			c, err := e.connectedDomains(ctx, ip)
			adopted = time.Now()
			return err == nil && int(c) >= n, errors.Join(err, fmt.Errorf("%v of %d connected", c, n))
		}); err != nil {
			return err
		}
	}
	e.log.Info("agent restarted", "process", started.Sub(killed), "healthz", healthy.Sub(killed), "readyz", ready.Sub(killed),
		"adopted", adopted.Sub(killed), "connectedAtReadyz", connectedAtReady)

	time.Sleep(10 * time.Second) // time for a disturbance to show
	var disturbed []string
	for name, b := range was {
		var why []string
		vmi, err := e.virt.KubevirtV1().VirtualMachineInstances(benchNamespace).Get(ctx, name, getOpts)
		if err != nil {
			return fmt.Errorf("VMI %s: %w", name, err)
		}
		if pid, err := e.qemuPid(ctx, vmi); err != nil || pid != b.qemu {
			why = append(why, fmt.Sprintf("QEMU pid %d → %d (%v)", b.qemu, pid, err))
		}
		if st, err := e.qmpStatus(ctx, name); err != nil || st != b.runState {
			why = append(why, fmt.Sprintf("run state %s → %s (%v)", b.runState, st, err))
		}
		for _, tr := range e.vmis.transitionsSince(name, killed) {
			why = append(why, fmt.Sprintf("%s→%v", tr.Key, tr.On))
		}
		if vmi.Status.Phase != v1.Running {
			why = append(why, "phase "+string(vmi.Status.Phase))
		}
		if len(why) > 0 {
			disturbed = append(disturbed, name+": "+strings.Join(why, ", "))
		}
	}
	r.add(
		summarize(sc, "SIGKILL → new agent process (kubelet restarts the container)", "s", []float64{started.Sub(killed).Seconds()}),
		summarize(sc, "SIGKILL → agent /healthz answers", "s", []float64{healthy.Sub(killed).Seconds()}),
		summarize(sc, "new agent process → /readyz answers", "s", []float64{ready.Sub(started).Seconds()}),
		summarize(sc, "QMP connections held when /readyz answered", "VMs", []float64{connectedAtReady}),
		summarize(sc, "new agent process → every VM re-adopted", "s", []float64{adopted.Sub(started).Seconds()}),
		summarize(sc, "floor: a bare QMP client attaches to every VM (greeting, capabilities, query-status; as many at a time as the agent has workers)", "s", floorSecs),
		summarize(sc, "SIGKILL → every VM re-adopted", "s", []float64{adopted.Sub(killed).Seconds()}),
		summarize(sc, "VMs disturbed", "VMs", []float64{float64(len(disturbed))}),
	)
	r.note(sc, "%d VMs (the burst's, paused). The new agent's /readyz answers once every record live in its store at start has been synced once (a running VM's first sync re-attaches to its QEMU), polled every 20 ms; its nodevirt_agent_domains_connected (QMP connections held) is read on /metrics right after. Re-adopted = when /readyz answered if that count was %d then, else when a later scrape (every 100 ms) showed it. Disturbed = QEMU pid changed, QMP run state changed, any phase/condition change seen through the API server since the kill, or phase not Running 10 s after re-adoption. Floor, in the same run: between the SIGKILL and the new process, this benchmark's own QMP client attaches to every VM's QEMU as the agent's attach does (dial, greeting, capabilities, query-status), %d at a time as the agent's workers, and hangs up; it counts only if it ended before the new process appeared. SIGKILL → new process is the kubelet's restart of the container: the local cluster caps its CrashLoopBackOff at 2 s, and a pod sync that finds the container still backing off is retried by the kubelet's pod worker about 10 s later, unless another event of the pod (a probe result) comes first.", n, n, agent.DefaultConfig().Workers)
	for _, d := range disturbed {
		r.note(sc, "disturbed: %s", d)
	}
	return nil
}

// qemuPid is the host pid of the VMI's QEMU.
func (e *env) qemuPid(ctx context.Context, vmi *v1.VirtualMachineInstance) (int, error) {
	pod, err := e.launcherPod(ctx, string(vmi.UID))
	if err != nil {
		return 0, err
	}
	pid, err := localcluster.PodQEMU(string(pod.UID))
	if err != nil {
		return 0, fmt.Errorf("VMI %s: %w", vmi.Name, err)
	}
	return pid, nil
}

// qmpStatus asks QEMU for its run state (query-status) through the node
// API's debug route.
func (e *env) qmpStatus(ctx context.Context, name string) (string, error) {
	ret, err := e.nodectl.QMP(ctx, benchNamespace+"/"+name, api.Command{Execute: "query-status"})
	if err != nil {
		return "", fmt.Errorf("query-status %s: %w", name, err)
	}
	var st struct {
		Status string `json:"status"`
	}
	if err := json.Unmarshal(ret, &st); err != nil {
		return "", fmt.Errorf("query-status %s: %w", name, err)
	}
	return st.Status, nil
}

// connectedDomains reads the agent's nodevirt_agent_domains_connected
// (QMP connections held) from its /metrics.
func (e *env) connectedDomains(ctx context.Context, podIP string) (float64, error) {
	fams, err := e.agentMetrics(ctx, podIP)
	if err != nil {
		return 0, err
	}
	c, ok := gauge(fams, "nodevirt_agent_domains_connected")
	if !ok {
		return 0, errors.New("no nodevirt_agent_domains_connected on /metrics")
	}
	return c, nil
}

// probe reports whether the agent at podIP answers path (/healthz,
// /readyz) with 200.
func (e *env) probe(ctx context.Context, podIP, path string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(podIP, agentMetricsPort)+path, nil)
	if err != nil {
		return false, err
	}
	resp, err := e.http.Do(req)
	if err != nil {
		return false, err
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK, fmt.Errorf("%s: HTTP %d", path, resp.StatusCode)
}
