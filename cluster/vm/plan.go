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
)

func (a Action) String() string {
	return [...]string{"None", "CreateVMI", "DeleteVMI", "AdoptVMI", "AddFinalizer", "RemoveFinalizer"}[a]
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
		var reqs []v1.VirtualMachineStateChangeRequest
		r.Action, reqs, r.RequeueAfter = planRun(strategy, status.StateChangeRequests, vmi, status.StartFailure, o.Now)
		status.StateChangeRequests = reqs
		if o.Relation == Foreign && r.Action == CreateVMI {
			r.Action = None
		}
		if vmi != nil && vmi.Status.Phase == v1.Running && status.StartFailure != nil {
			if left := StableRun - ranFor(vmi, o.Now); left > 0 && (r.RequeueAfter == 0 || left < r.RequeueAfter) {
				r.RequeueAfter = left
			}
		}
	}
	r.Status = deriveStatus(vm, vmi, status, o.Now)
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

// planRun applies the state change requests, then the run strategy. It
// returns the action, the remaining requests and a requeue delay.
func planRun(strategy v1.VirtualMachineRunStrategy, reqs []v1.VirtualMachineStateChangeRequest,
	vmi *v1.VirtualMachineInstance, sf *v1.VirtualMachineStartFailure, now time.Time) (Action, []v1.VirtualMachineStateChangeRequest, time.Duration) {
	if vmi != nil && vmi.DeletionTimestamp != nil {
		return None, reqs, 0 // wait until the VMI is gone
	}
	for len(reqs) > 0 {
		req := reqs[0]
		switch req.Action {
		case v1.StopRequest:
			if vmi != nil && (req.UID == nil || *req.UID == vmi.UID) {
				return DeleteVMI, reqs, 0 // dropped once the VMI is gone
			}
			reqs = reqs[1:]
		case v1.StartRequest:
			switch {
			case strategy == v1.RunStrategyHalted:
				reqs = reqs[1:]
			case vmi == nil:
				return CreateVMI, reqs[1:], 0 // an explicit start skips the backoff
			case vmi.Status.Phase.IsFinal():
				return DeleteVMI, reqs, 0
			default:
				reqs = reqs[1:] // already running
			}
		default:
			reqs = reqs[1:]
		}
	}
	if len(reqs) == 0 {
		reqs = nil
	}
	act, wait := planStrategy(strategy, vmi, sf, now)
	return act, reqs, wait
}

// planStrategy is the run strategy's decision with no pending requests.
func planStrategy(strategy v1.VirtualMachineRunStrategy, vmi *v1.VirtualMachineInstance,
	sf *v1.VirtualMachineStartFailure, now time.Time) (Action, time.Duration) {
	create := func() (Action, time.Duration) {
		if restartsOnFailure(strategy) {
			if wait := inBackoff(sf, now); wait > 0 {
				return None, wait
			}
		}
		return CreateVMI, 0
	}
	switch strategy {
	case v1.RunStrategyHalted:
		if vmi != nil {
			return DeleteVMI, 0
		}
	case v1.RunStrategyAlways:
		if vmi == nil {
			return create()
		}
		if vmi.Status.Phase.IsFinal() {
			return DeleteVMI, 0
		}
	case v1.RunStrategyRerunOnFailure:
		if vmi == nil {
			return create()
		}
		if vmi.Status.Phase == v1.Failed {
			return DeleteVMI, 0
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
