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
//	RerunOnFailure  no VMI → create when the VM first runs under this
//	                strategy (status.runStrategy differs) or its last VMI
//	                failed (status.startFailure set); a final VMI is
//	                deleted, so after a guest shutdown or a stop the VM
//	                stays stopped with no VMI
//	Once            no VMI → create; a final VMI is kept, never recreated
//	                (deleting the kept VMI by hand starts the VM once more)
//	Manual          only state change requests start and stop; a final VMI
//	                is kept
//	Halted          any VMI → delete
//
// A final VMI is deleted only once the VM status records how it ended
// (startFailure names a Failed VMI, is cleared for a Succeeded one), so the
// failure that decides RerunOnFailure's restart survives the VMI. The
// status.runStrategy is recorded from the first VMI on and not in the sync
// that creates one, as KubeVirt's.
//
// # State change requests (status.stateChangeRequests)
//
// nodevirt-api appends them for `virtctl start/stop/restart` (Start; Stop
// naming the VMI UID; restart = [Stop{uid}, Start]). They are walked oldest
// first before the run strategy, which acts only once none is pending:
//
//	Stop{uid}  VMI with that UID → delete it; the request is removed once
//	           the VMI is gone
//	           no VMI, another UID (an older VMI), no UID → removed
//	Start      no VMI → create (no backoff wait); removed with the create
//	           (kept if the API server rejects it); data paused=true
//	           creates the VMI with startStrategy Paused
//	           VMI not final → removed (already running)
//	           final VMI → delete it, then create as above
//	           Halted VM, no VMI → spec.runStrategy (or spec.running)
//	           becomes Always, then create as above (KubeVirt's
//	           `virtctl start --paused` on a Halted VM)
//	any        VMI being deleted → wait
//
// Acting on a Start or Stop clears status.startFailure: an explicit start
// or stop ends a crash loop (KubeVirt's virt-api clears it when it appends).
// Removing processed requests is part of the controller's status patch,
// which carries the observed resourceVersion: a request appended meanwhile
// makes it conflict, and the next sync sees both (docs/status-ownership.md).
//
// Differences from KubeVirt v1.6: a bare Start on a finished Manual or Once
// VMI replaces it (KubeVirt's API sends Stop{uid}+Start there, and the
// controller leaves a bare one pending); a Stop of a Failed RerunOnFailure
// VMI stops the VM (KubeVirt restarts it); a RerunOnFailure VMI deleted by
// hand while startFailure is set (within StableRun of a failure) is
// recreated (KubeVirt recreates one only after the failure itself).
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
