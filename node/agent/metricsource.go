package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/node/launchspec"
	"github.com/nodevirt/nodevirt/node/metrics"
	"github.com/nodevirt/nodevirt/qmp"
	"github.com/nodevirt/nodevirt/store"
)

// balloonPath is the QOM path of the balloon device the launch spec
// builder adds (id balloon0), and balloonPeriod the guest-stats polling
// interval the source sets when it finds polling off.
const (
	balloonPath   = "/machine/peripheral/balloon0"
	balloonPeriod = 10 // seconds
)

// MetricsSource returns the source of the per-VM statistics for
// node/metrics' Collector.
func (a *Agent) MetricsSource() metrics.Source { return metricsSource{a} }

// metricsSource reads VM statistics from the informer cache, the store,
// /proc, the pod netns and the domain's QMP and guest agent connections.
type metricsSource struct{ a *Agent }

// VMs lists the VMIs of the node from the informer cache (no API call).
func (s metricsSource) VMs() []metrics.VM {
	objs := s.a.vmis.GetStore().List()
	vms := make([]metrics.VM, 0, len(objs))
	for _, obj := range objs {
		vmi, ok := obj.(*v1.VirtualMachineInstance)
		if !ok {
			continue
		}
		vm := metrics.VM{
			UID: string(vmi.UID), Namespace: vmi.Namespace, Name: vmi.Name,
			Phase: string(vmi.Status.Phase),
		}
		s.a.mu.Lock()
		d := s.a.domains[vm.UID]
		s.a.mu.Unlock()
		if d != nil {
			vm.Live = d.qmpConn() != nil
			vm.OS = d.guestOSInfo().ID
		}
		vms = append(vms, vm)
	}
	return vms
}

// Stats gathers one VM's statistics. A section that fails (no balloon,
// no guest agent, a tap not found) is left out; Stats fails only when
// the VM has no live QEMU to read.
func (s metricsSource) Stats(ctx context.Context, vm metrics.VM) (metrics.Stats, error) {
	rec, err := s.a.deps.Store.Get(ctx, vm.UID)
	if err != nil {
		return metrics.Stats{}, fmt.Errorf("vmi %s/%s: %w", vm.Namespace, vm.Name, err)
	}
	s.a.mu.Lock()
	d := s.a.domains[vm.UID]
	s.a.mu.Unlock()
	if d == nil || rec.Process.PID == 0 {
		return metrics.Stats{}, fmt.Errorf("vmi %s/%s: no QEMU", vm.Namespace, vm.Name)
	}
	conn := rawQMP(d.qmpConn())
	if conn == nil {
		return metrics.Stats{}, fmt.Errorf("vmi %s/%s: QMP not connected", vm.Namespace, vm.Name)
	}
	pid := rec.Process.PID
	var st metrics.Stats
	var errs []error
	if cpu, err := metrics.ProcessCPU("/proc", pid); err == nil {
		st.CPU = &cpu
	} else {
		errs = append(errs, err)
	}
	st.Memory = s.memory(ctx, conn, pid, vm.UID)
	if taps := tapsOf(rec); len(taps) > 0 {
		ifs, err := metrics.TapCounters(netnsPath(pid), taps)
		st.Interfaces = ifs
		errs = append(errs, err)
	}
	drives, err := s.drives(ctx, conn, rec)
	st.Drives = drives
	errs = append(errs, err)
	st.Filesystems = s.filesystems(ctx, d)
	st.Migration = s.migration(ctx, conn, rec)
	if err := errors.Join(errs...); err != nil {
		s.a.log.Debug("vm statistics incomplete", "vmi", vm.Namespace+"/"+vm.Name, "err", err)
	}
	return st, ctx.Err()
}

// memory reads the QEMU process's RSS and the balloon's figures; it turns
// the balloon's guest-stats polling on when it finds it off.
func (s metricsSource) memory(ctx context.Context, conn *qmp.Conn, pid int, uid string) *metrics.Memory {
	m := metrics.UnknownMemory()
	if rss, err := metrics.ProcessRSS("/proc", pid); err == nil {
		m.ResidentBytes = rss
	}
	if vmi := s.a.vmiOf(uid); vmi != nil && vmi.Spec.Domain.Memory != nil && vmi.Spec.Domain.Memory.Guest != nil {
		m.DomainBytes = vmi.Spec.Domain.Memory.Guest.Value()
	}
	done := s.a.metrics.timeQMP("query-balloon")
	b, err := conn.QueryBalloon(ctx)
	done()
	if err != nil {
		return &m // no balloon
	}
	m.ActualBalloonBytes = b.Actual
	done = s.a.metrics.timeQMP("qom-get guest-stats")
	bs, err := conn.QueryBalloonStats(ctx, balloonPath)
	done()
	if err != nil {
		return &m
	}
	if bs.LastUpdate == 0 {
		// Polling is off (or the guest never reported): turn it on; the
		// figures appear from a later scrape.
		_ = conn.SetBalloonStatsInterval(ctx, balloonPath, balloonPeriod)
		return &m
	}
	pick := func(k string) int64 {
		if v, ok := bs.Stats[k]; ok {
			return v
		}
		return -1
	}
	m.AvailableBytes = pick("stat-total-memory")
	m.UsableBytes = pick("stat-available-memory")
	m.UnusedBytes = pick("stat-free-memory")
	return &m
}

// tapsOf maps the record's interface names to their taps.
func tapsOf(rec store.Record) map[string]string {
	taps := map[string]string{}
	for _, i := range rec.Interfaces {
		if i.Tap != "" {
			taps[i.Name] = i.Tap
		}
	}
	return taps
}

// drives reads query-blockstats and names each device by its VMI disk,
// through the launch spec's device map.
func (s metricsSource) drives(ctx context.Context, conn *qmp.Conn, rec store.Record) ([]metrics.Drive, error) {
	var spec launchspec.Spec
	if len(rec.Spec) == 0 {
		return nil, nil
	}
	if err := json.Unmarshal(rec.Spec, &spec); err != nil {
		return nil, fmt.Errorf("launch spec of %s: %w", rec.UID, err)
	}
	var disks []launchspec.Device
	for _, dev := range spec.Devices {
		if dev.Kind == launchspec.DeviceDisk {
			disks = append(disks, dev)
		}
	}
	if len(disks) == 0 {
		return nil, nil
	}
	done := s.a.metrics.timeQMP("query-blockstats")
	stats, err := conn.QueryBlockstats(ctx)
	done()
	if err != nil {
		return nil, fmt.Errorf("query-blockstats of %s: %w", rec.UID, err)
	}
	var out []metrics.Drive
	for _, bs := range stats {
		name, ok := diskName(disks, bs)
		if !ok {
			continue
		}
		out = append(out, metrics.Drive{
			Name:    name,
			ReadOps: bs.Stats.RdOperations, WriteOps: bs.Stats.WrOperations,
			ReadBytes: bs.Stats.RdBytes, WriteBytes: bs.Stats.WrBytes,
		})
	}
	return out, nil
}

// diskName finds the VMI disk of a block device: by its guest device
// (qdev is the id or a QOM path under /machine/peripheral/<id>/), its
// block node or its drive id.
func diskName(disks []launchspec.Device, bs qmp.BlockStats) (string, bool) {
	for _, d := range disks {
		switch {
		case bs.QDev != "" && (bs.QDev == d.ID || strings.HasPrefix(bs.QDev, path.Join("/machine/peripheral", d.ID)+"/")):
			return d.Name, true
		case d.Node != "" && bs.NodeName == d.Node:
			return d.Name, true
		case bs.Device != "" && bs.Device == d.ID:
			return d.Name, true
		}
	}
	return "", false
}

// filesystems asks the guest agent, when connected, for its file systems.
func (s metricsSource) filesystems(ctx context.Context, d *domain) []metrics.Filesystem {
	ga := rawAgent(d.guestAgent())
	if ga == nil {
		return nil
	}
	done := s.a.metrics.timeQMP("guest-get-fsinfo")
	fss, err := ga.FSInfo(ctx)
	done()
	if err != nil {
		return nil
	}
	var out []metrics.Filesystem
	for _, fs := range fss {
		if fs.TotalBytes == 0 {
			continue // pseudo file systems, or sizes the agent did not report
		}
		out = append(out, metrics.Filesystem{
			DiskName: fs.Name, MountPoint: fs.Mountpoint, FSType: fs.Type,
			CapacityBytes: fs.TotalBytes, UsedBytes: fs.UsedBytes,
		})
	}
	return out
}

// migration reads the progress of this node's outgoing migration.
func (s metricsSource) migration(ctx context.Context, conn *qmp.Conn, rec store.Record) *metrics.Migration {
	if rec.Migration == nil || rec.Migration.Role != "source" || !rec.Migration.Ended.IsZero() {
		return nil
	}
	done := s.a.metrics.timeQMP("query-migrate")
	mi, err := conn.QueryMigrate(ctx)
	done()
	if err != nil || mi.RAM == nil {
		return nil
	}
	return &metrics.Migration{
		ProcessedBytes:       mi.RAM.Transferred,
		RemainingBytes:       mi.RAM.Remaining,
		DirtyMemoryRateBytes: mi.RAM.DirtyPagesRate * mi.RAM.PageSize,
	}
}
