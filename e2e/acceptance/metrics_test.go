package acceptance

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/e2e/localcluster"
	"github.com/nodevirt/nodevirt/node/metrics/promtest"
)

// metricsService is the agents' metrics Service (deploy/agent/metrics-service.yaml).
const metricsService = "nodevirt-agent-metrics"

// userScrapeConfig is how a user's Prometheus outside the cluster finds
// the agents: Kubernetes service discovery through kubeconfig and the two
// usual annotation-driven jobs (as in the prometheus-community chart),
// service endpoints with the prometheus.io/{scrape,scheme,path,port}
// annotations of a Service, and pods with the same annotations on a pod.
// The agents must come in once, through the Service; the pods job is there
// to catch a second way in. honor_labels keeps the series' own namespace and
// node (the VMI's) instead of renaming them exported_* under the target's.
// Discovery is limited to the nodevirt namespace.
func userScrapeConfig(kubeconfig string) string {
	return fmt.Sprintf(`- job_name: kubernetes-service-endpoints
  honor_labels: true
  kubernetes_sd_configs:
  - role: endpoints
    kubeconfig_file: %[1]q
    namespaces:
      names: [nodevirt]
  relabel_configs:
  - source_labels: [__meta_kubernetes_service_annotation_prometheus_io_scrape]
    action: keep
    regex: "true"
  - source_labels: [__meta_kubernetes_service_annotation_prometheus_io_scheme]
    target_label: __scheme__
    regex: (https?)
  - source_labels: [__meta_kubernetes_service_annotation_prometheus_io_path]
    target_label: __metrics_path__
    regex: (.+)
  - source_labels: [__address__, __meta_kubernetes_service_annotation_prometheus_io_port]
    target_label: __address__
    regex: ([^:]+)(?::\d+)?;(\d+)
    replacement: $1:$2
  - action: labelmap
    regex: __meta_kubernetes_service_label_(.+)
  - source_labels: [__meta_kubernetes_namespace]
    target_label: namespace
  - source_labels: [__meta_kubernetes_service_name]
    target_label: service
  - source_labels: [__meta_kubernetes_pod_name]
    target_label: pod
  - source_labels: [__meta_kubernetes_pod_node_name]
    target_label: node
- job_name: kubernetes-pods
  honor_labels: true
  kubernetes_sd_configs:
  - role: pod
    kubeconfig_file: %[1]q
    namespaces:
      names: [nodevirt]
  relabel_configs:
  - source_labels: [__meta_kubernetes_pod_annotation_prometheus_io_scrape]
    action: keep
    regex: "true"
  - source_labels: [__meta_kubernetes_pod_annotation_prometheus_io_scheme]
    target_label: __scheme__
    regex: (https?)
  - source_labels: [__meta_kubernetes_pod_annotation_prometheus_io_path]
    target_label: __metrics_path__
    regex: (.+)
  - source_labels: [__address__, __meta_kubernetes_pod_annotation_prometheus_io_port]
    target_label: __address__
    regex: ([^:]+)(?::\d+)?;(\d+)
    replacement: $1:$2
  - action: labelmap
    regex: __meta_kubernetes_pod_label_(.+)
  - source_labels: [__meta_kubernetes_namespace]
    target_label: namespace
  - source_labels: [__meta_kubernetes_pod_name]
    target_label: pod
  - source_labels: [__meta_kubernetes_pod_node_name]
    target_label: node
`, kubeconfig)
}

// prometheusK8s is the Prometheus built with Kubernetes service discovery
// (make prometheus-k8s; Debian's package has none). Missing, it fails the
// test with CI=true and skips it otherwise.
func prometheusK8s(t *testing.T) string {
	t.Helper()
	out, err := localcluster.OutDir()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(out, "bin", "prometheus")
	if _, err := os.Stat(bin); err != nil {
		msg := fmt.Sprintf("%s missing: run make prometheus-k8s (or make test)", bin)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return bin
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

// Issue 10's cluster check: a real Prometheus on the host (a child process
// of the test) discovers the agent through the nodevirt-agent-metrics
// Service exactly as a user's would, scrapes the agent pod at its pod IP,
// and PromQL returns the test VM's CPU, memory, network and storage series
// with the right labels; the counters grow while the guest works.
func testPrometheusScrape(t *testing.T, s *suite) {
	const name = "scraped"
	bin := prometheusK8s(t)
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

	began := time.Now()
	p := promtest.Start(t, promtest.Config{
		Binary:         bin,
		ScrapeInterval: time.Second,
		ScrapeConfigs:  userScrapeConfig(s.cluster.Kubeconfig),
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
		if got.Metric["job"] != "kubernetes-service-endpoints" || got.Metric["service"] != metricsService {
			t.Errorf("%s: job %q service %q, want kubernetes-service-endpoints and %s", ps.name, got.Metric["job"], got.Metric["service"], metricsService)
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

	// By now every job has had many scrapes: still one series per VM,
	// from the service endpoints job only.
	q := "count by (job) (" + series[0].query(name) + ")"
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := p.Query(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].Metric["job"] != "kubernetes-service-endpoints" || res[0].Value[1] != "1" {
		t.Errorf("PromQL %s = %v, want one series from job kubernetes-service-endpoints", q, res)
	}
}

// waitAgentTarget waits until Prometheus has discovered the agent pod
// through the metrics Service and its last scrape succeeded.
func waitAgentTarget(t *testing.T, p *promtest.Server, agent corev1.Pod, timeout time.Duration) promtest.Target {
	t.Helper()
	wantURL := "http://" + net.JoinHostPort(agent.Status.PodIP, "8443") + "/metrics"
	var last []promtest.Target
	var lastErr error
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		last, lastErr = p.Targets(ctx)
		cancel()
		for _, tg := range last {
			if tg.DiscoveredLabels["__meta_kubernetes_service_name"] != metricsService ||
				tg.DiscoveredLabels["__meta_kubernetes_pod_name"] != agent.Name {
				continue
			}
			if tg.ScrapeURL != wantURL {
				t.Fatalf("agent target scrapes %s, want %s (labels %v)", tg.ScrapeURL, wantURL, tg.DiscoveredLabels)
			}
			if tg.Health == "up" {
				return tg
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no healthy Prometheus target for agent pod %s via Service %s after %v (error %v); active targets: %+v",
				agent.Name, metricsService, timeout, lastErr, last)
		}
		time.Sleep(poll)
	}
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
