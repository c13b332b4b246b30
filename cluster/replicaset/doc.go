// Package replicaset is the VirtualMachineInstanceReplicaSet controller: it
// keeps spec.replicas VMIs created from the replica set's template, with
// KubeVirt's semantics, and writes the replica set's status. It owns the
// VMIs it creates or adopts (their controller ownerReference) and nothing
// else of them: phases, pods and finalizers belong to the vmi controller
// and the node agent.
//
// # Model
//
// Sync observes the replica set and every VMI of its namespace (informer
// caches), calls the pure [Plan] and applies what it returns, in order:
//
//  1. adopt orphan VMIs (no controller) that the selector matches; release
//     owned VMIs it no longer matches (remove the ownerReference; the VMI
//     keeps running);
//  2. delete ended VMIs (phase Succeeded or Failed, or Ready=False with
//     reason PodTerminating): they are replaced, since they are not
//     counted as replicas, the same sync creates their successors;
//  3. scale: create missing VMIs (generateName <template name | template
//     generateName | replica set name>, e.g. "vmi-replicaset-cirros" +
//     five random characters; the template's labels and annotations; a
//     controller ownerReference with blockOwnerDeletion), or delete the
//     surplus, cheapest first: not yet running (Pending, Scheduling,
//     Scheduled) before Running, not Ready before Ready, newest before
//     older, then the greater name first. KubeVirt v1.6 deletes in
//     informer order (its TODO names "not yet running first"); this order
//     is apps/v1's.
//
// At most [BurstReplicas] creates and as many deletes per sync. Paused
// (spec.paused) and deleted replica sets neither create nor delete
// (ownership changes and status continue); the garbage collector removes
// the VMIs of a deleted replica set.
//
// # Expectations
//
// Creates and deletes are recorded in [reconcile.Expectations] before they are sent
// and settled by the VMI informer (a new owned VMI; a VMI with a
// deletionTimestamp or gone); a failed request settles its own. Until
// everything is settled (or [reconcile.ExpectationTTL] passed) the replica set does
// not scale, so a cache that lags a burst of creates never makes it create
// the same replicas twice. Deletes carry a UID precondition.
//
// # Status (written by this controller only, by update of the status subresource)
//
//	replicas       owned VMIs neither ended nor being deleted
//	readyReplicas  of those, the ones with Ready=True
//	labelSelector  spec.selector as a string (the scale subresource's selector)
//	conditions     ReplicaPaused (True, reason Paused) while spec.paused;
//	               ReplicaFailure (True, reason FailedCreate or FailedDelete,
//	               the API error as message) after a sync whose creates or
//	               deletes failed, removed by the next sync that has none
//
// Validation (CRD schema and CEL, deploy/crds): selector and template are
// required, the selector must not be empty and must match the template's
// labels (the error names spec.selector), replicas defaults to 1.
//
// Concurrency: one Controller serves any number of workers; the queue
// guarantees one key is never synced by two workers at once. The VMI
// handler ([Controller.VMIHandler]) may run concurrently with syncs.
package replicaset
