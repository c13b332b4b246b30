package metrics_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/nodevirt/nodevirt/node/metrics"
)

// fakeSource serves fixed statistics; a VM in stuck blocks until its
// context ends (a hung QEMU that honours cancellation late).
type fakeSource struct {
	vms   []metrics.VM
	stats map[string]metrics.Stats
	fail  map[string]bool
	stuck map[string]bool
}

func (f *fakeSource) VMs() []metrics.VM { return f.vms }

func (f *fakeSource) Stats(ctx context.Context, vm metrics.VM) (metrics.Stats, error) {
	if f.stuck[vm.UID] {
		<-ctx.Done()
		return metrics.Stats{}, ctx.Err()
	}
	if f.fail[vm.UID] {
		return metrics.Stats{}, errors.New("no QMP")
	}
	return f.stats[vm.UID], nil
}

func fullStats() metrics.Stats {
	mem := metrics.UnknownMemory()
	mem.ResidentBytes, mem.DomainBytes = 1000, 2000
	return metrics.Stats{
		CPU:         &metrics.CPU{UsageSeconds: 1.5, VCPUs: []metrics.VCPU{{ID: "0", State: "running", Seconds: 1.25}}},
		Memory:      &mem,
		Interfaces:  []metrics.Interface{{Name: "default", RxBytes: 10, TxBytes: 20, RxPackets: 1, TxPackets: 2}},
		Drives:      []metrics.Drive{{Name: "rootdisk", ReadOps: 3, WriteOps: 4, ReadBytes: 512, WriteBytes: 1024}},
		Filesystems: []metrics.Filesystem{{DiskName: "vda1", MountPoint: "/", FSType: "ext4", CapacityBytes: 100, UsedBytes: 50}},
		Migration:   &metrics.Migration{ProcessedBytes: 7, RemainingBytes: 8, DirtyMemoryRateBytes: 9},
	}
}

func newCollector(t *testing.T, src metrics.Source, timeout time.Duration) (*metrics.Collector, *prometheus.Registry) {
	t.Helper()
	c, err := metrics.New(metrics.Config{Node: "node1", Timeout: timeout}, src)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	return c, reg
}

func TestCollector_Series(t *testing.T) {
	src := &fakeSource{
		vms: []metrics.VM{
			{UID: "u1", Namespace: "ns", Name: "vm1", Phase: "Running", OS: "debian", Live: true},
			{UID: "u2", Namespace: "ns", Name: "vm2", Phase: "Scheduled"},
		},
		stats: map[string]metrics.Stats{"u1": fullStats()},
	}
	_, reg := newCollector(t, src, time.Second)
	want := `
# HELP kubevirt_vmi_cpu_usage_seconds_total Total CPU time spent in all modes (user and system) by the VM's QEMU process.
# TYPE kubevirt_vmi_cpu_usage_seconds_total counter
kubevirt_vmi_cpu_usage_seconds_total{name="vm1",namespace="ns",node="node1"} 1.5
# HELP kubevirt_vmi_vcpu_seconds_total Total CPU time spent by each vCPU thread, labelled with the thread's current state.
# TYPE kubevirt_vmi_vcpu_seconds_total counter
kubevirt_vmi_vcpu_seconds_total{id="0",name="vm1",namespace="ns",node="node1",state="running"} 1.25
# HELP kubevirt_vmi_memory_resident_bytes Resident set size of the VM's QEMU process.
# TYPE kubevirt_vmi_memory_resident_bytes gauge
kubevirt_vmi_memory_resident_bytes{name="vm1",namespace="ns",node="node1"} 1000
# HELP kubevirt_vmi_memory_domain_bytes Memory given to the VM.
# TYPE kubevirt_vmi_memory_domain_bytes gauge
kubevirt_vmi_memory_domain_bytes{name="vm1",namespace="ns",node="node1"} 2000
# HELP kubevirt_vmi_network_receive_bytes_total Bytes received by the guest on the interface.
# TYPE kubevirt_vmi_network_receive_bytes_total counter
kubevirt_vmi_network_receive_bytes_total{interface="default",name="vm1",namespace="ns",node="node1"} 10
# HELP kubevirt_vmi_network_transmit_packets_total Packets sent by the guest on the interface.
# TYPE kubevirt_vmi_network_transmit_packets_total counter
kubevirt_vmi_network_transmit_packets_total{interface="default",name="vm1",namespace="ns",node="node1"} 2
# HELP kubevirt_vmi_storage_iops_read_total Read operations completed on the drive.
# TYPE kubevirt_vmi_storage_iops_read_total counter
kubevirt_vmi_storage_iops_read_total{drive="rootdisk",name="vm1",namespace="ns",node="node1"} 3
# HELP kubevirt_vmi_storage_write_traffic_bytes_total Bytes written to the drive.
# TYPE kubevirt_vmi_storage_write_traffic_bytes_total counter
kubevirt_vmi_storage_write_traffic_bytes_total{drive="rootdisk",name="vm1",namespace="ns",node="node1"} 1024
# HELP kubevirt_vmi_filesystem_used_bytes Used bytes of the guest file system, from the guest agent.
# TYPE kubevirt_vmi_filesystem_used_bytes gauge
kubevirt_vmi_filesystem_used_bytes{disk_name="vda1",file_system_type="ext4",mount_point="/",name="vm1",namespace="ns",node="node1"} 50
# HELP kubevirt_vmi_migration_data_remaining_bytes Guest memory left to send by the running migration.
# TYPE kubevirt_vmi_migration_data_remaining_bytes gauge
kubevirt_vmi_migration_data_remaining_bytes{name="vm1",namespace="ns",node="node1"} 8
# HELP kubevirt_vmi_phase_count VMIs on the node per phase and guest OS.
# TYPE kubevirt_vmi_phase_count gauge
kubevirt_vmi_phase_count{node="node1",os="",phase="Scheduled"} 1
kubevirt_vmi_phase_count{node="node1",os="debian",phase="Running"} 1
`
	names := []string{
		"kubevirt_vmi_cpu_usage_seconds_total", "kubevirt_vmi_vcpu_seconds_total",
		"kubevirt_vmi_memory_resident_bytes", "kubevirt_vmi_memory_domain_bytes",
		"kubevirt_vmi_memory_unused_bytes", // unknown: absent
		"kubevirt_vmi_network_receive_bytes_total", "kubevirt_vmi_network_transmit_packets_total",
		"kubevirt_vmi_storage_iops_read_total", "kubevirt_vmi_storage_write_traffic_bytes_total",
		"kubevirt_vmi_filesystem_used_bytes", "kubevirt_vmi_migration_data_remaining_bytes",
		"kubevirt_vmi_phase_count",
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	if n, err := testutil.GatherAndCount(reg); err != nil || n == 0 {
		t.Errorf("GatherAndCount = %d, %v", n, err)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP nodevirt_agent_scrape_vms VMs whose statistics the last scrape exported.
# TYPE nodevirt_agent_scrape_vms gauge
nodevirt_agent_scrape_vms{node="node1"} 1
`), "nodevirt_agent_scrape_vms"); err != nil {
		t.Error(err)
	}
}

func TestCollector_StuckVMSkippedWithinDeadline(t *testing.T) {
	const timeout = 200 * time.Millisecond
	src := &fakeSource{
		vms: []metrics.VM{
			{UID: "ok", Namespace: "ns", Name: "fine", Phase: "Running", Live: true},
			{UID: "stuck", Namespace: "ns", Name: "hung", Phase: "Running", Live: true},
			{UID: "bad", Namespace: "ns", Name: "broken", Phase: "Running", Live: true},
		},
		stats: map[string]metrics.Stats{"ok": fullStats()},
		stuck: map[string]bool{"stuck": true},
		fail:  map[string]bool{"bad": true},
	}
	_, reg := newCollector(t, src, timeout)
	for scrape := 1; scrape <= 2; scrape++ {
		start := time.Now()
		mfs, err := reg.Gather()
		took := time.Since(start)
		if err != nil {
			t.Fatal(err)
		}
		if took > timeout+time.Second {
			t.Errorf("scrape %d took %v, want about the %v deadline", scrape, took, timeout)
		}
		names := map[string]bool{}
		for _, mf := range mfs {
			if mf.GetName() != "kubevirt_vmi_cpu_usage_seconds_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "name" {
						names[l.GetValue()] = true
					}
				}
			}
		}
		if !names["fine"] || names["hung"] || names["broken"] {
			t.Errorf("scrape %d: cpu series for %v, want only fine", scrape, names)
		}
		if got := value(mfs, "nodevirt_agent_scrape_timeouts_total"); got != float64(scrape) {
			t.Errorf("scrape %d: timeouts = %v, want %d", scrape, got, scrape)
		}
		if got := value(mfs, "nodevirt_agent_scrape_errors"); got != 1 {
			t.Errorf("scrape %d: errors = %v, want 1", scrape, got)
		}
	}
}

// value returns the value of the single series of a gauge or counter.
func value(mfs []*dto.MetricFamily, name string) float64 {
	for _, mf := range mfs {
		if mf.GetName() != name || len(mf.GetMetric()) != 1 {
			continue
		}
		m := mf.GetMetric()[0]
		if m.GetCounter() != nil {
			return m.GetCounter().GetValue()
		}
		return m.GetGauge().GetValue()
	}
	return -1
}

func TestConfig_Validate(t *testing.T) {
	tests := []struct {
		name string
		cfg  metrics.Config
		ok   bool
	}{
		{"ok", metrics.Config{Node: "n", Timeout: time.Second}, true},
		{"no node", metrics.Config{Timeout: time.Second}, false},
		{"no timeout", metrics.Config{Node: "n"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.cfg.Validate(); (err == nil) != tt.ok {
				t.Errorf("Validate() = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}
