package migration

import (
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// Timeouts after which a target pod that does not run fails the migration
// (KubeVirt's values).
const (
	// DefaultUnschedulableTimeout: the target pod was unschedulable this long.
	DefaultUnschedulableTimeout = 5 * time.Minute
	// DefaultPendingTimeout: the target pod did not run this long after its
	// creation, for whatever reason (image pulls, a stuck kubelet).
	DefaultPendingTimeout = 15 * time.Minute
)

// Config is the migration controller's share of the cluster configuration.
type Config struct {
	// Migrations are the cluster-wide limits and options (KubeVirt's
	// spec.configuration.migrations); unset fields take KubeVirt's defaults.
	Migrations v1.MigrationConfiguration
	// EvictionStrategy is the default for VMIs that set none ("" = None).
	EvictionStrategy v1.EvictionStrategy
	// UnschedulableTimeout and PendingTimeout default to the Default* values.
	UnschedulableTimeout time.Duration
	PendingTimeout       time.Duration
}

func (c Config) withDefaults() Config {
	c.Migrations = WithDefaults(c.Migrations)
	if c.UnschedulableTimeout <= 0 {
		c.UnschedulableTimeout = DefaultUnschedulableTimeout
	}
	if c.PendingTimeout <= 0 {
		c.PendingTimeout = DefaultPendingTimeout
	}
	return c
}

// WithDefaults fills the unset fields of m with KubeVirt's defaults.
func WithDefaults(m v1.MigrationConfiguration) v1.MigrationConfiguration {
	m = *m.DeepCopy()
	if m.ParallelMigrationsPerCluster == nil {
		m.ParallelMigrationsPerCluster = ptr.To(v1.DefaultParallelMigrationsPerCluster)
	}
	if m.ParallelOutboundMigrationsPerNode == nil {
		m.ParallelOutboundMigrationsPerNode = ptr.To(v1.DefaultParallelOutboundMigrationsPerNode)
	}
	if m.BandwidthPerMigration == nil {
		q := resource.MustParse(v1.DefaultBandwidthPerMigration)
		m.BandwidthPerMigration = &q
	}
	if m.CompletionTimeoutPerGiB == nil {
		m.CompletionTimeoutPerGiB = ptr.To(v1.DefaultCompletionTimeoutPerGiB)
	}
	if m.ProgressTimeout == nil {
		m.ProgressTimeout = ptr.To(v1.DefaultProgressTimeout)
	}
	if m.AllowAutoConverge == nil {
		m.AllowAutoConverge = ptr.To(false)
	}
	if m.AllowPostCopy == nil {
		m.AllowPostCopy = ptr.To(false)
	}
	if m.AllowWorkloadDisruption == nil {
		m.AllowWorkloadDisruption = ptr.To(false)
	}
	return m
}

// EvictionStrategy is the VMI's spec.evictionStrategy, or the cluster's
// default, or None.
func EvictionStrategy(vmi *v1.VirtualMachineInstance, clusterDefault v1.EvictionStrategy) v1.EvictionStrategy {
	switch {
	case vmi.Spec.EvictionStrategy != nil:
		return *vmi.Spec.EvictionStrategy
	case clusterDefault != "":
		return clusterDefault
	}
	return v1.EvictionStrategyNone
}
