package subresources

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// target is the object a lifecycle patch applies to: the VM (spec), the
// VM's status subresource, or the VMI of the same name.
type target int

const (
	targetVM target = iota
	targetVMStatus
	targetVMI
)

func (t target) String() string {
	return [...]string{"VM", "VM status", "VMI"}[t]
}

// jsonOp is one RFC 6902 operation. Value is always written, so that a
// test against an absent field reads "value": null.
type jsonOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// patch is one JSON patch of a lifecycle plan.
type patch struct {
	Target target
	Ops    []jsonOp
}

// plan is what a VM lifecycle request does, in order: JSON patches, then,
// for a forced restart, deleting the VMI's launcher pod.
type plan struct {
	Patches        []patch
	DeleteLauncher bool
}

// isActive reports whether vmi counts as running for start: it exists, is
// not final and its phase is known.
func isActive(vmi *v1.VirtualMachineInstance) bool {
	return vmi != nil && !vmi.Status.Phase.IsFinal() && vmi.Status.Phase != v1.Unknown && vmi.Status.Phase != v1.VmPhaseUnset
}

func isFinal(vmi *v1.VirtualMachineInstance) bool {
	return vmi == nil || vmi.Status.Phase.IsFinal()
}

// planStart decides PUT start on vm whose VMI is vmi (nil: none).
//
//	Halted          spec.runStrategy → Always; with paused, a Start request
//	                {paused: true} instead (the controller then runs it paused)
//	Manual          Start request (Stop{old uid} + Start if the VMI is final)
//	RerunOnFailure  the same; refused if the VMI Failed
//	Always, Once    refused
func planStart(vm *v1.VirtualMachine, vmi *v1.VirtualMachineInstance, opts StartOptions) (plan, error) {
	if isActive(vmi) {
		return plan{}, conflictVM(vm.Name, msgVMIRunning)
	}
	start := v1.VirtualMachineStateChangeRequest{Action: v1.StartRequest}
	if opts.Paused {
		start.Data = map[string]string{"paused": "true"}
	}
	rs := vm.Spec.EffectiveRunStrategy()
	switch rs {
	case v1.RunStrategyHalted:
		if opts.Paused && !startsPaused(vm) {
			return statusPlan(vm, start)
		}
		return plan{Patches: []patch{{Target: targetVM, Ops: runStrategyOps(vm, v1.RunStrategyAlways)}}}, nil
	case v1.RunStrategyManual, v1.RunStrategyRerunOnFailure:
		if rs == v1.RunStrategyRerunOnFailure && vmi != nil && vmi.Status.Phase == v1.Failed {
			return plan{}, conflictVM(vm.Name, fmt.Sprintf("%v does not support starting VM from failed state", rs))
		}
		restart := (rs == v1.RunStrategyRerunOnFailure && vmi != nil && vmi.Status.Phase == v1.Succeeded) ||
			(rs == v1.RunStrategyManual && vmi != nil && vmi.Status.Phase.IsFinal())
		if restart {
			return statusPlan(vm, stopRequest(vmi), start)
		}
		return statusPlan(vm, start)
	default:
		return plan{}, conflictVM(vm.Name, fmt.Sprintf("%v does not support manual start requests", rs))
	}
}

// startsPaused reports whether the VM's template already starts paused.
func startsPaused(vm *v1.VirtualMachine) bool {
	t := vm.Spec.Template
	return t != nil && t.Spec.StartStrategy != nil && *t.Spec.StartStrategy == v1.StartStrategyPaused
}

// planStop decides PUT stop.
//
//	Halted          only with a grace period shorter than the VMI's: the
//	                VMI's grace period is patched, then a Stop request
//	Manual, RerunOnFailure  Stop{uid} request (grace period patched first)
//	Always, Once    spec.runStrategy → Halted (grace period patched first)
//
// Unlike virt-api, a refused stop patches nothing (virt-api patches the
// VMI's grace period before it refuses).
func planStop(vm *v1.VirtualMachine, vmi *v1.VirtualMachineInstance, opts StopOptions) (plan, error) {
	var p plan
	if !isFinal(vmi) && opts.GracePeriod != nil {
		p.Patches = append(p.Patches, patch{Target: targetVMI, Ops: gracePeriodOps(vmi, *opts.GracePeriod)})
	}
	rs := vm.Spec.EffectiveRunStrategy()
	switch rs {
	case v1.RunStrategyHalted:
		if isFinal(vmi) {
			return plan{}, conflictVM(vm.Name, msgVMNotRunning)
		}
		old := vmi.Spec.TerminationGracePeriodSeconds
		if opts.GracePeriod == nil || (old != nil && *opts.GracePeriod >= *old) {
			return plan{}, conflictVM(vm.Name, fmt.Sprintf("%v only supports manual stop requests with a shorter graceperiod", rs))
		}
		fallthrough
	case v1.RunStrategyManual, v1.RunStrategyRerunOnFailure:
		if isFinal(vmi) {
			return plan{}, conflictVM(vm.Name, msgVMNotRunning)
		}
		ops, err := changeRequestOps(vm, stopRequest(vmi))
		if err != nil {
			return plan{}, err
		}
		p.Patches = append(p.Patches, patch{Target: targetVMStatus, Ops: ops})
	default:
		p.Patches = append(p.Patches, patch{Target: targetVM, Ops: runStrategyOps(vm, v1.RunStrategyHalted)})
	}
	return p, nil
}

// validateRestart checks the restart body before anything is read: only a
// forced restart (gracePeriodSeconds 0) may name a grace period.
func validateRestart(opts RestartOptions) error {
	if g := opts.GracePeriodSeconds; g != nil {
		if *g > 0 {
			return apierrors.NewBadRequest("For force restart, only gracePeriod=0 is supported for now")
		}
		if *g < 0 {
			return apierrors.NewBadRequest("gracePeriod has to be greater or equal to 0")
		}
	}
	return nil
}

// planRestart decides PUT restart: Stop{uid} + Start requests, on any run
// strategy but Halted and Once, for a VM that has a VMI. A forced restart
// also deletes the launcher pod.
func planRestart(vm *v1.VirtualMachine, vmi *v1.VirtualMachineInstance, opts RestartOptions) (plan, error) {
	if err := validateRestart(opts); err != nil {
		return plan{}, err
	}
	rs := vm.Spec.EffectiveRunStrategy()
	if rs == v1.RunStrategyHalted || rs == v1.RunStrategyOnce {
		// "RunStategy" is virt-api's spelling.
		return plan{}, conflictVM(vm.Name, fmt.Sprintf("RunStategy %v does not support manual restart requests", rs))
	}
	if vmi == nil {
		return plan{}, conflictVM(vm.Name, fmt.Sprintf("VM is not running: %v", v1.RunStrategyHalted))
	}
	p, err := statusPlan(vm, stopRequest(vmi), v1.VirtualMachineStateChangeRequest{Action: v1.StartRequest})
	p.DeleteLauncher = opts.GracePeriodSeconds != nil
	return p, err
}

// planMigrate checks PUT migrate: the VMI must be Running. The options'
// addedNodeSelector goes into the VMIM as is; the migration controller
// merges it into the target pod's node selector.
func planMigrate(vm *v1.VirtualMachine, vmi *v1.VirtualMachineInstance) error {
	if vmi == nil {
		return apierrors.NewNotFound(grVMI, vm.Name)
	}
	if vmi.Status.Phase != v1.Running {
		return conflictVM(vm.Name, msgVMNotRunning)
	}
	return nil
}

func stopRequest(vmi *v1.VirtualMachineInstance) v1.VirtualMachineStateChangeRequest {
	uid := vmi.UID
	return v1.VirtualMachineStateChangeRequest{Action: v1.StopRequest, UID: &uid}
}

func statusPlan(vm *v1.VirtualMachine, changes ...v1.VirtualMachineStateChangeRequest) (plan, error) {
	ops, err := changeRequestOps(vm, changes...)
	if err != nil {
		return plan{}, err
	}
	return plan{Patches: []patch{{Target: targetVMStatus, Ops: ops}}}, nil
}

// changeRequestOps appends changes to status.stateChangeRequests, testing
// that the list is still the one read. An empty status is added whole. A
// single Stop replaces pending requests; anything else on top of pending
// requests is refused (500, as virt-api). A recorded start failure is
// removed, so that the request is not held back by crash-loop backoff.
func changeRequestOps(vm *v1.VirtualMachine, changes ...v1.VirtualMachineStateChangeRequest) ([]jsonOp, error) {
	var ops []jsonOp
	if equality.Semantic.DeepEqual(vm.Status, v1.VirtualMachineStatus{}) {
		return []jsonOp{{Op: "add", Path: "/status", Value: v1.VirtualMachineStatus{StateChangeRequests: changes}}}, nil
	}
	pending := vm.Status.StateChangeRequests
	ops = append(ops, jsonOp{Op: "test", Path: "/status/stateChangeRequests", Value: nullIfEmpty(pending)})
	switch {
	case len(pending) == 0:
		ops = append(ops, jsonOp{Op: "add", Path: "/status/stateChangeRequests", Value: changes})
	case len(changes) == 1 && changes[0].Action == v1.StopRequest:
		ops = append(ops, jsonOp{Op: "replace", Path: "/status/stateChangeRequests", Value: changes})
	default:
		return nil, apierrors.NewInternalError(fmt.Errorf("%s", msgUnderway))
	}
	if vm.Status.StartFailure != nil {
		ops = append(ops, jsonOp{Op: "remove", Path: "/status/startFailure"})
	}
	return ops, nil
}

func nullIfEmpty(l []v1.VirtualMachineStateChangeRequest) any {
	if len(l) == 0 {
		return nil
	}
	return l
}

// runStrategyOps sets the VM's run strategy to rs, testing the field it
// read. A VM using the legacy spec.running keeps it (true/false); a VM with
// neither field gets spec.runStrategy.
func runStrategyOps(vm *v1.VirtualMachine, rs v1.VirtualMachineRunStrategy) []jsonOp {
	switch {
	case vm.Spec.RunStrategy != nil:
		return []jsonOp{
			{Op: "test", Path: "/spec/runStrategy", Value: *vm.Spec.RunStrategy},
			{Op: "replace", Path: "/spec/runStrategy", Value: rs},
		}
	case vm.Spec.Running != nil:
		return []jsonOp{
			{Op: "test", Path: "/spec/running", Value: *vm.Spec.Running},
			{Op: "replace", Path: "/spec/running", Value: rs == v1.RunStrategyAlways},
		}
	default:
		return []jsonOp{
			{Op: "test", Path: "/spec/running", Value: nil},
			{Op: "test", Path: "/spec/runStrategy", Value: nil},
			{Op: "add", Path: "/spec/runStrategy", Value: rs},
		}
	}
}

// gracePeriodOps sets the VMI's spec.terminationGracePeriodSeconds to g,
// testing the value it read.
func gracePeriodOps(vmi *v1.VirtualMachineInstance, g int64) []jsonOp {
	const path = "/spec/terminationGracePeriodSeconds"
	if old := vmi.Spec.TerminationGracePeriodSeconds; old != nil {
		return []jsonOp{{Op: "test", Path: path, Value: *old}, {Op: "replace", Path: path, Value: g}}
	}
	return []jsonOp{{Op: "test", Path: path, Value: nil}, {Op: "add", Path: path, Value: g}}
}
