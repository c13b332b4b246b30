package migration

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// targetPodProblem says why the target pod fails the migration (it was
// deleted, it ended, it stayed unschedulable or pending too long), or how
// long until the next deadline of a target pod that does not run yet.
func targetPodProblem(o Observed) (reason, msg string, after time.Duration) {
	p := o.TargetPod
	switch {
	case p == nil || p.DeletionTimestamp != nil:
		return ReasonTargetPodDeleted, "the target pod was deleted", 0
	case p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded:
		return ReasonTargetPodFailed, fmt.Sprintf("the target pod %s ended (%s)", p.Name, p.Status.Phase), 0
	case p.Status.Phase == corev1.PodRunning && p.Spec.NodeName != "":
		return "", "", 0
	}
	next := p.CreationTimestamp.Add(o.PendingTimeout).Sub(o.Now)
	if next <= 0 {
		return ReasonPendingTimeout, fmt.Sprintf("the target pod %s did not run within %s", p.Name, o.PendingTimeout), 0
	}
	for _, c := range p.Status.Conditions {
		if c.Type != corev1.PodScheduled || c.Status != corev1.ConditionFalse || c.Reason != corev1.PodReasonUnschedulable {
			continue
		}
		left := c.LastTransitionTime.Add(o.UnschedulableTimeout).Sub(o.Now)
		if left <= 0 {
			return ReasonUnschedulable, fmt.Sprintf("the target pod %s was unschedulable for %s: %s", p.Name, o.UnschedulableTimeout, c.Message), 0
		}
		next = min(next, left)
	}
	return "", "", next
}

// targetPodName is the fixed name of a migration's target pod, so that
// creating it twice (a cache that lags) yields one pod.
func targetPodName(vmiName, migrationUID string) string {
	suffix := migrationUID
	if len(suffix) > 8 {
		suffix = suffix[:8]
	}
	name := "virt-launcher-" + vmiName
	if len(name) > 240 {
		name = name[:240]
	}
	return name + "-mig-" + suffix
}

// targetReadyOverdue bounds the target's preparation: once the migration
// is PreparingTarget, the target agent has the migration's progressTimeout
// (default 150 s) to report its domain ready (targetNodeAddress and
// targetNodeDomainReadyTimestamp). A target that never gets there — its
// launcher lost while the agent restarted, its node gone silent — would
// otherwise hold the VMI's one migration slot for ever. It returns the
// failure message when overdue, else how long until the deadline (0: no
// deadline runs).
func targetReadyOverdue(o Observed, s v1.VirtualMachineInstanceMigrationStatus, ms *v1.VirtualMachineInstanceMigrationState) (string, time.Duration) {
	if s.Phase != v1.MigrationPreparingTarget || (ms != nil && ms.TargetNodeDomainReadyTimestamp != nil) {
		return "", 0
	}
	since := statusPhaseTime(s, v1.MigrationPreparingTarget)
	if since.IsZero() {
		return "", 0
	}
	timeout := time.Duration(*o.Migration.ProgressTimeout) * time.Second
	left := since.Add(timeout).Sub(o.Now)
	if left <= 0 {
		return fmt.Sprintf("the target on %s did not get its domain ready within %s (progressTimeout)", targetNode(o, ms), timeout), 0
	}
	return "", left
}

func targetNode(o Observed, ms *v1.VirtualMachineInstanceMigrationState) string {
	switch {
	case ms != nil && ms.TargetNode != "":
		return ms.TargetNode
	case o.TargetPod != nil:
		return o.TargetPod.Spec.NodeName
	}
	return "its node"
}
