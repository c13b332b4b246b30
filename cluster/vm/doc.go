// Package vm is the VirtualMachine controller: it keeps zero or one
// VirtualMachineInstance per VirtualMachine according to the VM's run
// strategy, and writes the VM's status. It writes nothing else: VMI phases
// belong to the vmi controller and the node agent.
//
// # Model
//
// Sync observes the VM and the VMI of the same name (from informer caches),
// calls the pure [Plan], applies the one action it returns (create, delete
// or adopt the VMI, or a finalizer change), then writes the planned status
// if it differs. Every action is idempotent; the VMI name is fixed (= the VM
// name), so a repeated create only meets AlreadyExists.
//
// # Run strategies (spec.runStrategy; spec.running true|false = Always|Halted)
//
//	Always          no VMI → create; final VMI → delete (then create again)
//	RerunOnFailure  no VMI → create; Failed → delete and recreate;
//	                Succeeded is kept, so the VM stays stopped
//	Once            no VMI → create; a final VMI is kept, never recreated
//	                (deleting the kept VMI by hand starts the VM once more)
//	Manual          only state change requests start and stop
//	Halted          any VMI → delete
//
// status.stateChangeRequests are processed head first before the strategy:
// Stop (optionally naming a VMI UID; a stale UID drops the request) deletes
// the VMI and is dropped once it is gone; Start creates the VMI (deleting a
// final one first) and is dropped once created; Start on Halted is dropped.
// A restart is [Stop{uid}, Start].
//
// # Crash-loop backoff (Always and RerunOnFailure)
//
// Each VMI that ends Failed is counted once (status.startFailure keeps its
// UID). The next VMI is created no earlier than
// 10 s × consecutiveFailCount² + up to 50 % jitter, capped at 300 s;
// meanwhile printableStatus is CrashLoopBackOff. The count starts again at
// 1 when the failed VMI had been Running for at least StableRun (5 min), and
// startFailure is cleared once a VMI has been Running that long or ends
// Succeeded.
//
// # Ownership
//
// The VMI carries a controller ownerReference to the VM. A VMI with the VM's
// name and no controller is adopted; one controlled by something else is
// left alone (event VMIOwnedByOther); a VMI whose controller is a VM that no
// longer exists (or an older VM of the same name) is deleted as an orphan.
// The VM finalizer kubevirt.io/virtualMachineControllerFinalize holds a
// deleted VM until its VMI is gone.
//
// # Status
//
// printableStatus (Stopped, Starting, Running, Paused, Stopping,
// Terminating, CrashLoopBackOff, Migrating, Unknown, and the launcher pod
// problems the vmi controller mirrors on the VMI: ErrorUnschedulable,
// ErrImagePull, ImagePullBackOff, ErrorPvcNotFound), created, ready, the
// Ready and Paused conditions mirrored from the VMI, and Failure=True when
// the API server rejects the VMI created from the template (a permanent
// error: not retried until the VM changes).
//
// Concurrency: one Controller serves any number of workers; the queue
// guarantees that one key is never synced by two workers at once.
package vm
