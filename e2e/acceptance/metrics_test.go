package acceptance

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/hack/testenv"
	"github.com/nodevirt/nodevirt/node/metrics/promtest"
)

// metricsService is the agents' metrics Service (deploy/agent/metrics-service.yaml).
const metricsService = "nodevirt-agent-metrics"

// agentsJob is the scrape job of the check.
const agentsJob = "nodevirt-agents"

// discoverAgents does what Prometheus' Kubernetes service discovery (role
// endpoints) and the usual prometheus.io relabelling do for a Service,
// for the agents' metrics Service: it requires prometheus.io/scrape=true,
// takes the port and path from the annotations and writes one target per
// ready endpoint of its EndpointSlices, labelled with namespace, service,
// pod and node, to a file_sd file. Debian's prometheus (2.42) is built
// without Kubernetes service discovery, so the test does this step and
// Prometheus reads the file; docs/metrics.md has the kubernetes_sd_configs
// job a user's Prometheus runs instead.
func discoverAgents(t *testing.T, s *suite) (path string, targets int) {
	t.Helper()
	ctx := t.Context()
	svc, err := s.kube.CoreV1().Services("nodevirt").Get(ctx, metricsService, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("metrics Service: %v", err)
	}
	ann := svc.Annotations
	if ann["prometheus.io/scrape"] != "true" {
		t.Fatalf("Service %s: prometheus.io/scrape = %q, want \"true\"", metricsService, ann["prometheus.io/scrape"])
	}
	port, metricsPath := ann["prometheus.io/port"], ann["prometheus.io/path"]
	if port == "" || metricsPath == "" {
		t.Fatalf("Service %s: prometheus.io/port %q, prometheus.io/path %q: want both", metricsService, port, metricsPath)
	}
	slices, err := s.kube.DiscoveryV1().EndpointSlices("nodevirt").List(ctx, metav1.ListOptions{
		LabelSelector: discoveryv1.LabelServiceName + "=" + metricsService,
	})
	if err != nil {
		t.Fatalf("EndpointSlices of %s: %v", metricsService, err)
	}
	type group struct {
		Targets []string          `json:"targets"`
		Labels  map[string]string `json:"labels"`
	}
	var groups []group
	for _, sl := range slices.Items {
		for _, ep := range sl.Endpoints {
			if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
				continue
			}
			labels := map[string]string{"__metrics_path__": metricsPath, "namespace": "nodevirt", "service": metricsService}
			if ep.TargetRef != nil {
				labels["pod"] = ep.TargetRef.Name
			}
			if ep.NodeName != nil {
				labels["node"] = *ep.NodeName
			}
			for _, addr := range ep.Addresses {
				groups = append(groups, group{Targets: []string{net.JoinHostPort(addr, port)}, Labels: labels})
			}
		}
	}
	b, err := json.Marshal(groups)
	if err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(t.TempDir(), "agents.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path, len(groups)
}

// agentsScrapeConfig scrapes the discovered agents. honor_labels keeps the
// series' own namespace and node (the VMI's) instead of renaming them
// exported_* under the target's.
func agentsScrapeConfig(sdFile string) string {
	return fmt.Sprintf("- job_name: %s\n  honor_labels: true\n  file_sd_configs:\n  - files: [%q]\n", agentsJob, sdFile)
}

// promSeries is a series the check expects for its VM.
type promSeries struct {
	name   string
	extra  [2]string // one more label (name, value), or empty
	growth bool      // a counter that must grow while the guest works
}

func (p promSeries) labels(node, vm string) map[string]string {
	l := map[string]string{"node": node, "namespace": namespace, "name": vm}
	if p.extra[0] != "" {
		l[p.extra[0]] = p.extra[1]
	}
	return l
}

func (p promSeries) query(vm string) string {
	sel := fmt.Sprintf(`namespace=%q,name=%q`, namespace, vm)
	if p.extra[0] != "" {
		sel += fmt.Sprintf(`,%s=%q`, p.extra[0], p.extra[1])
	}
	return p.name + "{" + sel + "}"
}

// Issue 10's cluster check: a real Prometheus (Debian's) on the host, a
// child process of the test, scrapes the agent pods the
// nodevirt-agent-metrics Service and its annotations lead to, at their
// pod IPs,
// and PromQL returns the test VM's CPU, memory, network and storage series
// with the right labels; the counters grow while the guest works.
func testPrometheusScrape(t *testing.T, s *suite) {
	const name = "scraped"
	s.apply(t, s.vmManifest(t, name, "Always", ""))
	defer s.deleteVM(t, name)
	vmi := s.waitVMI(t, name, 60*time.Second, "Running", phaseIs(v1.Running))
	pod := s.launcherPod(t, vmi)
	if gw := s.waitSerial(t, pod, "NODEVIRT-GUEST-GW-", 120*time.Second); gw != "NODEVIRT-GUEST-GW-OK" {
		t.Fatalf("guest network: %s", gw)
	}
	vmi = s.waitVMI(t, name, 60*time.Second, "AgentConnected", func(v *v1.VirtualMachineInstance) bool {
		return condition(v, v1.VirtualMachineInstanceAgentConnected) == corev1.ConditionTrue
	})
	node := vmi.Status.NodeName
	agent := s.agentPod(t, node)

	sdFile, n := discoverAgents(t, s)
	if n != len(s.cluster.Nodes) {
		t.Errorf("Service %s: %d agent targets, want one per node (%d)", metricsService, n, len(s.cluster.Nodes))
	}
	began := time.Now()
	p := promtest.Start(t, promtest.Config{
		ScrapeInterval: time.Second,
		ScrapeConfigs:  agentsScrapeConfig(sdFile),
	})
	target := waitAgentTarget(t, p, agent, 60*time.Second)
	t.Logf("Prometheus target up %v after start: %s (pod %s on %s, service %s)", time.Since(began).Round(10*time.Millisecond),
		target.ScrapeURL, target.Labels["pod"], target.Labels["node"], target.Labels["service"])

	series := []promSeries{
		{name: "kubevirt_vmi_cpu_usage_seconds_total", growth: true},
		{name: "kubevirt_vmi_memory_resident_bytes"},
		{name: "kubevirt_vmi_network_receive_bytes_total", extra: [2]string{"interface", "default"}, growth: true},
		{name: "kubevirt_vmi_storage_iops_read_total", extra: [2]string{"drive", "cloudinit"}, growth: true},
	}
	before := map[string]float64{}
	for _, ps := range series {
		res := p.WaitQuery(t, 60*time.Second, ps.query(name))
		if len(res) != 1 {
			t.Errorf("%s: %d series, want 1 (the agent scraped more than once?): %v", ps.query(name), len(res), res)
		}
		got := res[0]
		if got.Metric["job"] != agentsJob || got.Metric["service"] != metricsService {
			t.Errorf("%s: job %q service %q, want %s and %s", ps.name, got.Metric["job"], got.Metric["service"], agentsJob, metricsService)
		}
		for k, want := range ps.labels(node, name) {
			if got.Metric[k] != want {
				t.Errorf("%s: label %s = %q, want %q (series %v)", ps.name, k, got.Metric[k], want, got.Metric)
			}
		}
		if got.Metric["instance"] != target.Labels["instance"] {
			t.Errorf("%s: instance %q, want the agent target's %q", ps.name, got.Metric["instance"], target.Labels["instance"])
		}
		v, err := got.Float()
		if err != nil {
			t.Fatal(err)
		}
		before[ps.name] = v
		t.Logf("PromQL %s → %v = %v", ps.query(name), got.Metric, v)
	}
	if rss := before["kubevirt_vmi_memory_resident_bytes"]; rss < 16<<20 {
		t.Errorf("resident bytes %v, want a QEMU's worth (> 16 MiB)", rss)
	}

	// Make the guest work: its CPU (a shell loop), its disk (reread past
	// the page cache) and its NIC (pings to the gateway, HTTP requests from
	// the host to the guest's port 80 through the pod IP).
	worked := time.Now()
	code, out := s.guestExec(t, vmi, 90*time.Second, "/bin/sh", "-c",
		`ping -c 3 10.0.2.1 >/dev/null; echo 3 > /proc/sys/vm/drop_caches; for d in /dev/vd*; do cat $d > /dev/null; done; i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; echo worked`)
	if code != 0 {
		t.Errorf("guest work: exit %d: %.300s", code, out)
	}
	url := "http://" + net.JoinHostPort(s.launcherPod(t, vmi).Status.PodIP, "80") + "/"
	for range 5 {
		httpGetEventually(t, url, 30*time.Second)
	}
	t.Logf("guest work (guest-exec shell, 5 HTTP GETs of %s): %v", url, time.Since(worked).Round(10*time.Millisecond))

	for _, ps := range series {
		if !ps.growth {
			continue
		}
		q := ps.query(name)
		after, waited := waitGrowth(t, p, q, before[ps.name], 30*time.Second)
		t.Logf("PromQL %s grew %v → %v (seen %v after the work)", q, before[ps.name], after, waited.Round(10*time.Millisecond))
	}

	// By now the job has had many scrapes: still one series per VM.
	q := "count by (job) (" + series[0].query(name) + ")"
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := p.Query(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].Metric["job"] != agentsJob || res[0].Value[1] != "1" {
		t.Errorf("PromQL %s = %v, want one series from job %s", q, res, agentsJob)
	}
}

// waitAgentTarget waits until Prometheus has discovered the agent pod
// through the metrics Service and its last scrape succeeded.
func waitAgentTarget(t *testing.T, p *promtest.Server, agent corev1.Pod, timeout time.Duration) promtest.Target {
	t.Helper()
	wantURL := "http://" + net.JoinHostPort(agent.Status.PodIP, "8443") + "/metrics"
	var target promtest.Target
	testenv.Eventually(t, timeout, fmt.Sprintf("a healthy Prometheus target for agent pod %s via Service %s", agent.Name, metricsService), func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		targets, err := p.Targets(ctx)
		cancel()
		if err != nil {
			return fmt.Errorf("Prometheus targets: %w", err)
		}
		for _, tg := range targets {
			if tg.Labels["service"] != metricsService || tg.Labels["pod"] != agent.Name {
				continue
			}
			if tg.ScrapeURL != wantURL {
				t.Fatalf("agent target scrapes %s, want %s (labels %v)", tg.ScrapeURL, wantURL, tg.DiscoveredLabels)
			}
			if tg.Health == "up" {
				target = tg
				return nil
			}
		}
		return fmt.Errorf("no healthy agent target yet; active targets: %+v", targets)
	})
	return target
}

// waitGrowth polls q until its single value exceeds before and returns the
// new value and how long that took.
func waitGrowth(t *testing.T, p *promtest.Server, q string, before float64, timeout time.Duration) (float64, time.Duration) {
	t.Helper()
	start := time.Now()
	last := before
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		res, err := p.Query(ctx, q)
		cancel()
		if err == nil && len(res) == 1 {
			if v, err := res[0].Float(); err == nil {
				last = v
				if v > before {
					return v, time.Since(start)
				}
			}
		}
		if time.Since(start) > timeout {
			t.Errorf("PromQL %s: still %v after %v (before the guest worked: %v)", q, last, timeout, before)
			return last, time.Since(start)
		}
		time.Sleep(poll)
	}
}
