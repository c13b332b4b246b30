package vm

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// Action is the one API change a sync makes besides the status write.
type Action int

// Actions, at most one per sync.
const (
	None Action = iota
	// CreateVMI creates the VMI from the VM's template.
	CreateVMI
	// DeleteVMI deletes the observed VMI (UID precondition).
	DeleteVMI
	// AdoptVMI makes the VM the controller owner of an orphan VMI.
	AdoptVMI
	// AddFinalizer adds the VM controller finalizer to the VM.
	AddFinalizer
	// RemoveFinalizer removes it from a deleted VM whose VMI is gone.
	RemoveFinalizer
	// StartHalted turns a Halted VM that has a Start request (`virtctl
	// start --paused`) into an Always one: spec.runStrategy Always, or
	// spec.running true when the VM uses running.
	StartHalted
)

func (a Action) String() string {
	return [...]string{"None", "CreateVMI", "DeleteVMI", "AdoptVMI", "AddFinalizer", "RemoveFinalizer", "StartHalted"}[a]
}

// Observed is what a sync sees: the VM, the VMI of the same name (nil if
// none) and how it relates to the VM, the time and a jitter sample in [0,1).
type Observed struct {
	VM       *v1.VirtualMachine
	VMI      *v1.VirtualMachineInstance
	Relation Relation
	Now      time.Time
	Jitter   float64
}

// Result is what a sync should do.
type Result struct {
	Action Action
	// StartPaused, with CreateVMI, creates the VMI with startStrategy
	// Paused (a Start request asked for it).
	StartPaused bool
	// Status is the VM status to write (written only if it changed).
	Status v1.VirtualMachineStatus
	// RequeueAfter > 0 asks for another sync then (backoff, stable-run timer).
	RequeueAfter time.Duration
}

// Plan decides the next action and the VM status. It is pure: it reads only
// its input and never mutates it.
func Plan(o Observed) Result {
	vm := o.VM
	status := *vm.Status.DeepCopy()
	strategy := vm.Spec.EffectiveRunStrategy()
	vmi := o.VMI
	switch o.Relation {
	case Foreign:
		vmi = nil // not ours: behave as if absent, but never create over it
	case Orphan:
		if vm.DeletionTimestamp == nil {
			return Result{Action: AdoptVMI, Status: status}
		}
		vmi = nil
	case Stale:
		r := Result{Status: deriveStatus(vm, nil, status, o.Now)}
		if vmi.DeletionTimestamp == nil {
			r.Action = DeleteVMI
		}
		return r
	}

	r := Result{}
	switch {
	case vm.DeletionTimestamp != nil:
		r.Action = planDeletion(vm, vmi)
	case !hasFinalizer(vm):
		r.Action = AddFinalizer
	default:
		status.StartFailure = trackFailure(status.StartFailure, strategy, vmi, o.Now, o.Jitter)
		rp := planRequests(strategy, status.StateChangeRequests, vmi)
		status.StateChangeRequests = rp.Pending
		if rp.Acting {
			r.Action, r.StartPaused = rp.Action, rp.Paused
			if (rp.Action == CreateVMI && o.Relation != Foreign) || rp.Action == DeleteVMI {
				// An explicit start or stop ends a crash loop: the next
				// VMI starts without waiting, and its count starts anew.
				status.StartFailure = nil
			}
		} else {
			r.Action, r.RequeueAfter = planStrategy(strategy, runMemory{
				prev: vm.Status.RunStrategy, recorded: vm.Status.StartFailure, planned: status.StartFailure,
			}, vmi, o.Now)
		}
		if o.Relation == Foreign && r.Action == CreateVMI {
			r.Action = None // a Start waits until the foreign VMI goes
		}
		if r.Action == CreateVMI && (vm.Status.RestoreInProgress != nil || vm.Status.SnapshotInProgress != nil) {
			// A restore rewrites the VM's spec and volumes, an offline
			// snapshot cuts them: the VM starts once they are done (the
			// status change brings it back here).
			r.Action = None
		}
		if rp.Action == CreateVMI && r.Action == CreateVMI {
			status.StateChangeRequests = nilIfEmpty(status.StateChangeRequests[1:])
		}
		if vmi != nil && vmi.Status.Phase == v1.Running && status.StartFailure != nil {
			if left := StableRun - ranFor(vmi, o.Now); left > 0 && (r.RequeueAfter == 0 || left < r.RequeueAfter) {
				r.RequeueAfter = left
			}
		}
	}
	r.Status = deriveStatus(vm, vmi, status, o.Now)
	if r.Action == CreateVMI {
		// status.runStrategy advances once the VMI is seen: a create the
		// API server rejects leaves it, so RerunOnFailure tries again
		// when the VM is fixed.
		r.Status.RunStrategy = vm.Status.RunStrategy
	}
	return r
}

func planDeletion(vm *v1.VirtualMachine, vmi *v1.VirtualMachineInstance) Action {
	switch {
	case vmi != nil && vmi.DeletionTimestamp == nil:
		return DeleteVMI
	case vmi == nil && hasFinalizer(vm):
		return RemoveFinalizer
	}
	return None
}

// runMemory is what the VM status remembers of earlier syncs.
type runMemory struct {
	// prev is status.runStrategy: the strategy under which the VMI was
	// last seen ("" if the VM never had one).
	prev v1.VirtualMachineRunStrategy
	// recorded is status.startFailure as observed; planned as it will be
	// written by this sync.
	recorded, planned *v1.VirtualMachineStartFailure
}

// finalRecorded reports whether the observed status already records how
// the final vmi ended: a Failed VMI is named by startFailure, a Succeeded
// one has cleared it. A final VMI is deleted only then, so the VM status
// never forgets a failure whose VMI is gone.
func (m runMemory) finalRecorded(vmi *v1.VirtualMachineInstance) bool {
	if vmi.Status.Phase == v1.Failed {
		return m.recorded != nil && m.recorded.LastFailedVMIUID == vmi.UID
	}
	return m.recorded == nil
}

// planStrategy is the run strategy's decision with no request acting.
func planStrategy(strategy v1.VirtualMachineRunStrategy, m runMemory, vmi *v1.VirtualMachineInstance,
	now time.Time) (Action, time.Duration) {
	if vmi != nil && vmi.DeletionTimestamp != nil {
		return None, 0 // wait until the VMI is gone
	}
	create := func() (Action, time.Duration) {
		if wait := inBackoff(m.planned, now); wait > 0 {
			return None, wait
		}
		return CreateVMI, 0
	}
	switch strategy {
	case v1.RunStrategyHalted:
		if vmi != nil {
			return DeleteVMI, 0
		}
	case v1.RunStrategyAlways:
		switch {
		case vmi == nil:
			return create()
		case vmi.Status.Phase == v1.Failed && !m.finalRecorded(vmi):
			return None, 0 // the status write records the failure first
		case vmi.Status.Phase.IsFinal():
			return DeleteVMI, 0
		}
	case v1.RunStrategyRerunOnFailure:
		switch {
		case vmi == nil:
			// Start on first use of this strategy, or again after a
			// failure; after a guest shutdown or a stop stay stopped.
			if m.prev != v1.RunStrategyRerunOnFailure || m.planned != nil {
				return create()
			}
		case vmi.Status.Phase.IsFinal():
			// Both outcomes delete the VMI; the failure (startFailure)
			// says whether a new one follows.
			if m.finalRecorded(vmi) {
				return DeleteVMI, 0
			}
		}
	case v1.RunStrategyOnce:
		if vmi == nil {
			return CreateVMI, 0
		}
	}
	return None, 0
}

func hasFinalizer(vm *v1.VirtualMachine) bool {
	for _, f := range vm.Finalizers {
		if f == v1.VirtualMachineControllerFinalizer {
			return true
		}
	}
	return false
}

// timeOrNow returns t unless it is zero.
func timeOrNow(t metav1.Time, now time.Time) metav1.Time {
	if t.IsZero() {
		return metav1.NewTime(now.Truncate(time.Second))
	}
	return t
}
