package vm

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// Crash-loop backoff parameters (KubeVirt's).
const (
	backoffBase = 10 * time.Second
	backoffCap  = 300 * time.Second
	// StableRun is how long a VMI must have been Running for its failure
	// not to count as a crash loop.
	StableRun = 5 * time.Minute
)

// backoffDelay is 10 s × count² plus jitter × 50 % of that, capped at 300 s.
// jitter is in [0, 1).
func backoffDelay(count int, jitter float64) time.Duration {
	if count < 1 {
		return 0
	}
	d := backoffBase * time.Duration(count*count)
	d += time.Duration(float64(d) * 0.5 * jitter)
	return min(d, backoffCap)
}

// restartsOnFailure reports whether a strategy recreates a failed VMI and
// so is subject to crash-loop backoff.
func restartsOnFailure(s v1.VirtualMachineRunStrategy) bool {
	return s == v1.RunStrategyAlways || s == v1.RunStrategyRerunOnFailure
}

// trackFailure returns the new status.startFailure given the current VMI.
func trackFailure(sf *v1.VirtualMachineStartFailure, strategy v1.VirtualMachineRunStrategy,
	vmi *v1.VirtualMachineInstance, now time.Time, jitter float64) *v1.VirtualMachineStartFailure {
	if !restartsOnFailure(strategy) {
		return nil
	}
	if vmi == nil {
		return sf
	}
	switch vmi.Status.Phase {
	case v1.Succeeded:
		return nil
	case v1.Running:
		if ranFor(vmi, now) >= StableRun {
			return nil
		}
	case v1.Failed:
		if sf != nil && sf.LastFailedVMIUID == vmi.UID {
			return sf
		}
		count := 1
		if sf != nil && ranFor(vmi, finalTime(vmi, now)) < StableRun {
			count = sf.ConsecutiveFailCount + 1
		}
		retry := metav1.NewTime(now.Add(backoffDelay(count, jitter)).Truncate(time.Second))
		return &v1.VirtualMachineStartFailure{
			LastFailedVMIUID:     vmi.UID,
			ConsecutiveFailCount: count,
			RetryAfterTimestamp:  &retry,
		}
	}
	return sf
}

// inBackoff returns how long creating the next VMI must still wait.
func inBackoff(sf *v1.VirtualMachineStartFailure, now time.Time) time.Duration {
	if sf == nil || sf.RetryAfterTimestamp == nil {
		return 0
	}
	return max(sf.RetryAfterTimestamp.Sub(now), 0)
}

// ranFor is how long the VMI has been (or was, until until) Running.
func ranFor(vmi *v1.VirtualMachineInstance, until time.Time) time.Duration {
	t, ok := phaseTime(vmi, v1.Running)
	if !ok {
		return 0
	}
	return until.Sub(t)
}

// finalTime is when the VMI reached its final phase (now if unrecorded).
func finalTime(vmi *v1.VirtualMachineInstance, now time.Time) time.Time {
	if t, ok := phaseTime(vmi, vmi.Status.Phase); ok {
		return t
	}
	return now
}

func phaseTime(vmi *v1.VirtualMachineInstance, p v1.VirtualMachineInstancePhase) (time.Time, bool) {
	for _, ts := range vmi.Status.PhaseTransitionTimestamps {
		if ts.Phase == p {
			return ts.PhaseTransitionTimestamp.Time, true
		}
	}
	return time.Time{}, false
}
