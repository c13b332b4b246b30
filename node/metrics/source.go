package metrics

import "context"

// Source is what the collector needs from the agent.
type Source interface {
	// VMs returns the VMs of the node. It must not block.
	VMs() []VM
	// Stats returns the statistics of the VM with the given UID. It may
	// block on QEMU or the guest agent and must return when ctx ends.
	Stats(ctx context.Context, vm VM) (Stats, error)
}

// VM identifies one VMI on the node.
type VM struct {
	UID       string
	Namespace string
	Name      string
	// Phase is the VMI's phase (status.phase), for the phase counts.
	Phase string
	// OS is the guest OS id reported by the guest agent, "" if unknown.
	OS string
	// Live reports whether the VM has a QEMU to ask: Stats is only called
	// for live VMs.
	Live bool
}

// Stats are one VM's statistics at one instant. Nil and empty sections
// are not exported.
type Stats struct {
	CPU         *CPU
	Memory      *Memory
	Interfaces  []Interface
	Drives      []Drive
	Filesystems []Filesystem
	Migration   *Migration
}

// CPU is the QEMU process's CPU time and its vCPU threads'.
type CPU struct {
	// UsageSeconds is user+system time of the whole QEMU process.
	UsageSeconds float64
	VCPUs        []VCPU
}

// VCPU is one vCPU thread.
type VCPU struct {
	ID      string // the vCPU index, "0", "1", ...
	State   string // "running" or "blocked" (the thread's scheduler state)
	Seconds float64
}

// Memory are the VM's memory figures in bytes; a negative value is
// unknown and not exported.
type Memory struct {
	ResidentBytes      int64 // RSS of the QEMU process
	AvailableBytes     int64 // guest: total memory as the guest sees it
	UsableBytes        int64 // guest: memory available without swapping
	UnusedBytes        int64 // guest: free memory
	DomainBytes        int64 // memory given to the VM (spec)
	ActualBalloonBytes int64 // current balloon size
}

// UnknownMemory returns a Memory with every figure unknown.
func UnknownMemory() Memory {
	return Memory{-1, -1, -1, -1, -1, -1}
}

// Interface are one VMI interface's counters, from the guest's view.
type Interface struct {
	Name                 string // the VMI interface name
	RxBytes, RxPackets   uint64
	TxBytes, TxPackets   uint64
	RxErrors, TxErrors   uint64
	RxDropped, TxDropped uint64
}

// Drive are one VMI disk's I/O counters.
type Drive struct {
	Name                  string // the VMI disk name
	ReadOps, WriteOps     uint64
	ReadBytes, WriteBytes uint64
}

// Filesystem is one guest file system as the guest agent reports it.
type Filesystem struct {
	DiskName      string
	MountPoint    string
	FSType        string
	CapacityBytes uint64
	UsedBytes     uint64
}

// Migration is the progress of an outgoing live migration.
type Migration struct {
	ProcessedBytes       int64
	RemainingBytes       int64
	DirtyMemoryRateBytes int64 // per second
}
