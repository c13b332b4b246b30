package metrics

import "github.com/prometheus/client_golang/prometheus"

// descs are the descriptors of every series the collector exports.
type descs struct {
	cpuUsage, vcpuSeconds                         *prometheus.Desc
	memResident, memAvailable, memUsable          *prometheus.Desc
	memUnused, memDomain, memBalloon              *prometheus.Desc
	rxBytes, txBytes, rxPackets, txPackets        *prometheus.Desc
	rxErrors, txErrors, rxDropped, txDropped      *prometheus.Desc
	iopsRead, iopsWrite, readBytes, writeBytes    *prometheus.Desc
	fsCapacity, fsUsed                            *prometheus.Desc
	migProcessed, migRemaining, migDirtyRate      *prometheus.Desc
	phaseCount, scrapeDuration, scrapeVMs, errors *prometheus.Desc
}

func newDescs(node string) descs {
	c := prometheus.Labels{"node": node}
	vm := []string{"namespace", "name"}
	with := func(extra ...string) []string { return append(append([]string{}, vm...), extra...) }
	d := func(name, help string, labels []string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, c)
	}
	return descs{
		cpuUsage:    d("kubevirt_vmi_cpu_usage_seconds_total", "Total CPU time spent in all modes (user and system) by the VM's QEMU process.", vm),
		vcpuSeconds: d("kubevirt_vmi_vcpu_seconds_total", "Total CPU time spent by each vCPU thread, labelled with the thread's current state.", with("id", "state")),

		memResident:  d("kubevirt_vmi_memory_resident_bytes", "Resident set size of the VM's QEMU process.", vm),
		memAvailable: d("kubevirt_vmi_memory_available_bytes", "Memory usable by the guest, as its balloon driver reports it.", vm),
		memUsable:    d("kubevirt_vmi_memory_usable_bytes", "Memory the guest can use without swapping, as its balloon driver reports it.", vm),
		memUnused:    d("kubevirt_vmi_memory_unused_bytes", "Memory left unused by the guest, as its balloon driver reports it.", vm),
		memDomain:    d("kubevirt_vmi_memory_domain_bytes", "Memory given to the VM.", vm),
		memBalloon:   d("kubevirt_vmi_memory_actual_balloon_bytes", "Current balloon size.", vm),

		rxBytes:   d("kubevirt_vmi_network_receive_bytes_total", "Bytes received by the guest on the interface.", with("interface")),
		txBytes:   d("kubevirt_vmi_network_transmit_bytes_total", "Bytes sent by the guest on the interface.", with("interface")),
		rxPackets: d("kubevirt_vmi_network_receive_packets_total", "Packets received by the guest on the interface.", with("interface")),
		txPackets: d("kubevirt_vmi_network_transmit_packets_total", "Packets sent by the guest on the interface.", with("interface")),
		rxErrors:  d("kubevirt_vmi_network_receive_errors_total", "Receive errors on the guest's interface.", with("interface")),
		txErrors:  d("kubevirt_vmi_network_transmit_errors_total", "Transmit errors on the guest's interface.", with("interface")),
		rxDropped: d("kubevirt_vmi_network_receive_packets_dropped_total", "Packets for the guest dropped on the interface.", with("interface")),
		txDropped: d("kubevirt_vmi_network_transmit_packets_dropped_total", "Packets from the guest dropped on the interface.", with("interface")),

		iopsRead:   d("kubevirt_vmi_storage_iops_read_total", "Read operations completed on the drive.", with("drive")),
		iopsWrite:  d("kubevirt_vmi_storage_iops_write_total", "Write operations completed on the drive.", with("drive")),
		readBytes:  d("kubevirt_vmi_storage_read_traffic_bytes_total", "Bytes read from the drive.", with("drive")),
		writeBytes: d("kubevirt_vmi_storage_write_traffic_bytes_total", "Bytes written to the drive.", with("drive")),

		fsCapacity: d("kubevirt_vmi_filesystem_capacity_bytes", "Capacity of the guest file system, from the guest agent.", with("disk_name", "mount_point", "file_system_type")),
		fsUsed:     d("kubevirt_vmi_filesystem_used_bytes", "Used bytes of the guest file system, from the guest agent.", with("disk_name", "mount_point", "file_system_type")),

		migProcessed: d("kubevirt_vmi_migration_data_processed_bytes", "Guest memory sent so far by the running migration.", vm),
		migRemaining: d("kubevirt_vmi_migration_data_remaining_bytes", "Guest memory left to send by the running migration.", vm),
		migDirtyRate: d("kubevirt_vmi_migration_dirty_memory_rate_bytes", "Rate at which the guest dirties memory during the migration, bytes per second.", vm),

		phaseCount:     d("kubevirt_vmi_phase_count", "VMIs on the node per phase and guest OS.", []string{"phase", "os"}),
		scrapeDuration: d("nodevirt_agent_scrape_duration_seconds", "Time the last scrape of VM statistics took.", nil),
		scrapeVMs:      d("nodevirt_agent_scrape_vms", "VMs whose statistics the last scrape exported.", nil),
		errors:         d("nodevirt_agent_scrape_errors", "VMs whose statistics failed in the last scrape.", nil),
	}
}

func (d *descs) all() []*prometheus.Desc {
	return []*prometheus.Desc{
		d.cpuUsage, d.vcpuSeconds,
		d.memResident, d.memAvailable, d.memUsable, d.memUnused, d.memDomain, d.memBalloon,
		d.rxBytes, d.txBytes, d.rxPackets, d.txPackets, d.rxErrors, d.txErrors, d.rxDropped, d.txDropped,
		d.iopsRead, d.iopsWrite, d.readBytes, d.writeBytes,
		d.fsCapacity, d.fsUsed,
		d.migProcessed, d.migRemaining, d.migDirtyRate,
		d.phaseCount, d.scrapeDuration, d.scrapeVMs, d.errors,
	}
}
