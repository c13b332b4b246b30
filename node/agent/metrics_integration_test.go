package agent_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/hack/testenv"
	"github.com/nodevirt/nodevirt/node/api"
)

// TestMetrics_Integration scrapes the real agent's /metrics while a real
// guest (QEMU under TCG, masquerade NIC, cloud-init disk) runs, and checks
// the KubeVirt-named series exist with the right labels and grow while
// the guest works.
func TestMetrics_Integration(t *testing.T) {
	h := newHarness(t)
	h.startAgent(t)
	v := h.createVM(t, "metrics", vmOpts{binding: "masquerade", userData: "#!/bin/sh\necho metrics-userdata\n", balloon: true})
	v.waitPhase(t, v1.Running, 60*time.Second)
	if l := v.waitSerial(t, "NODEVIRT-GUEST-GW", 120*time.Second); l != "NODEVIRT-GUEST-GW-OK" {
		t.Fatalf("guest network: %q", l)
	}
	testenv.Eventually(t, 60*time.Second, "guest agent", func() bool {
		vmi := v.get()
		return vmi != nil && conditionIs(vmi, v1.VirtualMachineInstanceAgentConnected, corev1.ConditionTrue)
	})

	vmLabels := map[string]string{"node": testNode, "namespace": h.ns, "name": v.name}
	with := func(k, val string) map[string]string {
		m := map[string]string{k: val}
		for k, v := range vmLabels {
			m[k] = v
		}
		return m
	}
	series := []struct {
		name   string
		labels map[string]string
	}{
		{"kubevirt_vmi_cpu_usage_seconds_total", vmLabels},
		{"kubevirt_vmi_memory_resident_bytes", vmLabels},
		{"kubevirt_vmi_network_receive_bytes_total", with("interface", "default")},
		{"kubevirt_vmi_network_transmit_bytes_total", with("interface", "default")},
		{"kubevirt_vmi_storage_iops_read_total", with("drive", "cloudinit")},
	}
	var before map[string]*dto.MetricFamily
	testenv.Eventually(t, 30*time.Second, "every series on /metrics", func() bool {
		before = h.scrape(t)
		for _, s := range series {
			if _, ok := sample(before, s.name, s.labels); !ok {
				return false
			}
		}
		return true
	})
	for _, s := range series {
		val, _ := sample(before, s.name, s.labels)
		t.Logf("%s %v = %v", s.name, s.labels, val)
	}
	if rss, _ := sample(before, "kubevirt_vmi_memory_resident_bytes", vmLabels); rss < 16<<20 {
		t.Errorf("resident bytes %v, want a QEMU's worth (> 16 MiB)", rss)
	}
	if _, ok := sample(before, "kubevirt_vmi_vcpu_seconds_total", with("id", "0")); !ok {
		t.Errorf("no kubevirt_vmi_vcpu_seconds_total for vCPU 0")
	}
	if n, ok := sample(before, "nodevirt_agent_domains_connected", map[string]string{"node": testNode}); !ok || n != 1 {
		t.Errorf("nodevirt_agent_domains_connected = %v, %v; want 1", n, ok)
	}
	if n, ok := sample(before, "kubevirt_vmi_phase_count", map[string]string{"node": testNode, "phase": "Running"}); !ok || n < 1 {
		t.Errorf("kubevirt_vmi_phase_count{phase=Running} = %v, %v", n, ok)
	}

	// The balloon: QEMU's figure at once, the guest's once the agent has
	// turned stats polling on and the guest has reported.
	if b, ok := sample(before, "kubevirt_vmi_memory_actual_balloon_bytes", vmLabels); !ok || b != 128<<20 {
		t.Errorf("actual balloon bytes = %v, %v; want 128 MiB", b, ok)
	}
	testenv.Eventually(t, 60*time.Second, "balloon guest stats", func() bool {
		fams := h.scrape(t)
		for _, name := range []string{"kubevirt_vmi_memory_available_bytes", "kubevirt_vmi_memory_usable_bytes", "kubevirt_vmi_memory_unused_bytes"} {
			if v, ok := sample(fams, name, vmLabels); !ok || v <= 0 {
				return false
			}
		}
		return true
	})

	// Make the guest work: ping its gateway, reread its disks past the
	// page cache, spin a little.
	c := api.NewClient(h.apiSocket)
	v.shellViaAPI(t, c, `ping -c 3 10.0.2.1; echo 3 > /proc/sys/vm/drop_caches; for d in /dev/vd*; do cat $d > /dev/null; done; i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done`)

	grown := func(name string, labels map[string]string) bool {
		after := h.scrape(t)
		b, _ := sample(before, name, labels)
		a, ok := sample(after, name, labels)
		return ok && a > b
	}
	for _, s := range series {
		if s.name == "kubevirt_vmi_memory_resident_bytes" {
			continue // a gauge: may stay put
		}
		testenv.Eventually(t, 20*time.Second, s.name+" to grow", func() bool { return grown(s.name, s.labels) })
	}

	t.Run("Prometheus", func(t *testing.T) {
		p := startPrometheus(t, h.metricsAddr)
		sel := fmt.Sprintf(`{namespace=%q,name=%q}`, h.ns, v.name)
		wantPromSeries(t, p, vmLabels,
			"kubevirt_vmi_cpu_usage_seconds_total"+sel,
			"kubevirt_vmi_memory_resident_bytes"+sel,
			`kubevirt_vmi_network_receive_bytes_total{interface="default"}`,
			`kubevirt_vmi_storage_iops_read_total{drive="cloudinit"}`,
			"rate(kubevirt_vmi_cpu_usage_seconds_total"+sel+"[5s]) > 0",
		)
	})

	start := time.Now()
	const n = 5
	for range n {
		h.scrape(t)
	}
	t.Logf("scrape of 1 running VM: %v (mean of %d)", time.Since(start)/n, n)
}

// readyz reports whether the agent's /readyz answers 200.
func (h *harness) readyz() bool {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get("http://" + h.metricsAddr + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// scrape GETs the agent's /metrics and parses it.
func (h *harness) scrape(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	c := &http.Client{Timeout: 20 * time.Second}
	resp, err := c.Get("http://" + h.metricsAddr + "/metrics")
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %s", resp.Status)
	}
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("scrape: parse: %v", err)
	}
	return fams
}

// sample returns the value of the series of name carrying every label in
// labels.
func sample(fams map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, bool) {
	mf, ok := fams[name]
	if !ok {
		return 0, false
	}
next:
	for _, m := range mf.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range labels {
			if have[k] != v {
				continue next
			}
		}
		switch {
		case m.GetCounter() != nil:
			return m.GetCounter().GetValue(), true
		case m.GetGauge() != nil:
			return m.GetGauge().GetValue(), true
		}
	}
	return 0, false
}

// shellViaAPI runs script with the guest's /bin/sh through guest-exec on
// the node API and waits for it to exit.
func (v *vm) shellViaAPI(t *testing.T, c *api.Client, script string) {
	t.Helper()
	code, out := v.execViaAPI(t, c, 60*time.Second, "/bin/sh", "-c", script)
	t.Logf("VM %s: guest shell exit %d: %.300s", v.name, code, out)
}
