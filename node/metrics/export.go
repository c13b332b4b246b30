package metrics

import "github.com/prometheus/client_golang/prometheus"

// export sends one VM's series.
func (c *Collector) export(ch chan<- prometheus.Metric, vm VM, s Stats) {
	d := &c.d
	send := func(desc *prometheus.Desc, t prometheus.ValueType, v float64, extra ...string) {
		labels := append([]string{vm.Namespace, vm.Name}, extra...)
		ch <- prometheus.MustNewConstMetric(desc, t, v, labels...)
	}
	counter := func(desc *prometheus.Desc, v uint64, extra ...string) {
		send(desc, prometheus.CounterValue, float64(v), extra...)
	}
	if s.CPU != nil {
		send(d.cpuUsage, prometheus.CounterValue, s.CPU.UsageSeconds)
		for _, v := range s.CPU.VCPUs {
			send(d.vcpuSeconds, prometheus.CounterValue, v.Seconds, v.ID, v.State)
		}
	}
	if m := s.Memory; m != nil {
		for _, g := range []struct {
			desc *prometheus.Desc
			v    int64
		}{
			{d.memResident, m.ResidentBytes}, {d.memAvailable, m.AvailableBytes},
			{d.memUsable, m.UsableBytes}, {d.memUnused, m.UnusedBytes},
			{d.memDomain, m.DomainBytes}, {d.memBalloon, m.ActualBalloonBytes},
		} {
			if g.v >= 0 {
				send(g.desc, prometheus.GaugeValue, float64(g.v))
			}
		}
	}
	for _, i := range s.Interfaces {
		counter(d.rxBytes, i.RxBytes, i.Name)
		counter(d.txBytes, i.TxBytes, i.Name)
		counter(d.rxPackets, i.RxPackets, i.Name)
		counter(d.txPackets, i.TxPackets, i.Name)
		counter(d.rxErrors, i.RxErrors, i.Name)
		counter(d.txErrors, i.TxErrors, i.Name)
		counter(d.rxDropped, i.RxDropped, i.Name)
		counter(d.txDropped, i.TxDropped, i.Name)
	}
	for _, dr := range s.Drives {
		counter(d.iopsRead, dr.ReadOps, dr.Name)
		counter(d.iopsWrite, dr.WriteOps, dr.Name)
		counter(d.readBytes, dr.ReadBytes, dr.Name)
		counter(d.writeBytes, dr.WriteBytes, dr.Name)
	}
	for _, f := range s.Filesystems {
		send(d.fsCapacity, prometheus.GaugeValue, float64(f.CapacityBytes), f.DiskName, f.MountPoint, f.FSType)
		send(d.fsUsed, prometheus.GaugeValue, float64(f.UsedBytes), f.DiskName, f.MountPoint, f.FSType)
	}
	if m := s.Migration; m != nil {
		send(d.migProcessed, prometheus.GaugeValue, float64(m.ProcessedBytes))
		send(d.migRemaining, prometheus.GaugeValue, float64(m.RemainingBytes))
		send(d.migDirtyRate, prometheus.GaugeValue, float64(m.DirtyMemoryRateBytes))
	}
}
