package migration

import (
	"strconv"
	"time"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// KubeVirt's annotations on a VMIM that override, for that migration, how
// long its target pod may stay unschedulable or pending (whole seconds).
// KubeVirt has them for functional tests; nodevirt's chaos harness uses
// them the same way.
const (
	AnnotationUnschedulableTimeout = "kubevirt.io/migrationUnschedulablePodTimeoutSeconds"
	AnnotationPendingTimeout       = "kubevirt.io/migrationPendingPodTimeoutSeconds"
)

// podTimeouts are the target pod timeouts of m: an annotation holding a
// positive number of seconds overrides the configuration's value; any
// other value is ignored, as KubeVirt does. It is pure.
func podTimeouts(m *v1.VirtualMachineInstanceMigration, cfg Config) (unschedulable, pending time.Duration) {
	cfg = cfg.withDefaults()
	return annotatedSeconds(m, AnnotationUnschedulableTimeout, cfg.UnschedulableTimeout),
		annotatedSeconds(m, AnnotationPendingTimeout, cfg.PendingTimeout)
}

func annotatedSeconds(m *v1.VirtualMachineInstanceMigration, key string, def time.Duration) time.Duration {
	n, err := strconv.ParseInt(m.Annotations[key], 10, 32)
	if err != nil || n <= 0 {
		return def
	}
	return time.Duration(n) * time.Second
}
