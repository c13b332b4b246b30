package vm

import (
	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// requestPlan is what the state change request queue decides in one sync.
type requestPlan struct {
	// Action is the head request's action: CreateVMI, DeleteVMI,
	// StartHalted, or None while it waits for the VMI to go.
	Action Action
	// Pending is the queue after dropping the requests that are done or
	// cannot apply, starting with the acting request; nil when empty. A
	// Start that CreateVMI acts on is removed by the caller with the create.
	Pending []v1.VirtualMachineStateChangeRequest
	// Acting is true when a request decides this sync: the run strategy
	// waits until the queue is empty.
	Acting bool
	// Paused asks for the created VMI to start with its vCPUs stopped.
	Paused bool
}

// planRequests walks status.stateChangeRequests oldest first. Each request
// is either done or inapplicable (dropped, and the next one is looked at)
// or acted on (the walk stops there):
//
//	Stop{uid}  VMI with that UID          → delete it; kept until it is gone
//	           no VMI, another UID, no UID → dropped
//	Start      no VMI                      → create it; removed with the create
//	           VMI not final               → dropped (already running)
//	           final VMI                   → delete it first; kept
//	           no VMI, strategy Halted     → StartHalted (spec becomes
//	                                         Always); kept
//	any        VMI being deleted (a Stop of its UID, or a Start) → wait
//
// A Start removed with its create is written in the same status patch as
// the rest of the sync; if the create fails the request stays.
func planRequests(strategy v1.VirtualMachineRunStrategy, reqs []v1.VirtualMachineStateChangeRequest,
	vmi *v1.VirtualMachineInstance) requestPlan {
	for len(reqs) > 0 {
		req := reqs[0]
		switch req.Action {
		case v1.StopRequest:
			if vmi != nil && req.UID != nil && *req.UID == vmi.UID {
				if vmi.DeletionTimestamp != nil {
					return requestPlan{Pending: reqs, Acting: true}
				}
				return requestPlan{Action: DeleteVMI, Pending: reqs, Acting: true}
			}
		case v1.StartRequest:
			switch {
			case vmi != nil && vmi.DeletionTimestamp != nil:
				return requestPlan{Pending: reqs, Acting: true}
			case vmi != nil && vmi.Status.Phase.IsFinal():
				return requestPlan{Action: DeleteVMI, Pending: reqs, Acting: true}
			case vmi != nil:
				// already running: done
			case strategy == v1.RunStrategyHalted:
				return requestPlan{Action: StartHalted, Pending: reqs, Acting: true}
			default:
				return requestPlan{Action: CreateVMI, Pending: reqs, Acting: true, Paused: startsPaused(req)}
			}
		}
		reqs = reqs[1:]
	}
	return requestPlan{}
}

// startsPaused reports a Start asking for the vCPUs to stay stopped
// (`virtctl start --paused`).
func startsPaused(req v1.VirtualMachineStateChangeRequest) bool {
	return req.Data[v1.StartRequestDataPausedKey] == v1.StartRequestDataPausedTrue
}

func nilIfEmpty(reqs []v1.VirtualMachineStateChangeRequest) []v1.VirtualMachineStateChangeRequest {
	if len(reqs) == 0 {
		return nil
	}
	return reqs
}
