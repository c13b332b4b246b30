// Package pool is the VirtualMachinePool controller (pool.kubevirt.io/v1alpha1):
// it keeps spec.replicas VirtualMachines created from the pool's
// virtualMachineTemplate, named <pool>-<index>, and writes the pool's
// status. It owns the VMs it creates (controller ownerReference with
// blockOwnerDeletion) and nothing else of them: the VM controller runs
// each VM's VMI by its run strategy.
//
// # Model
//
// Sync observes the pool and every VM and VMI of its namespace (informer
// caches; a VMI event enqueues its VM's pool),
// calls the pure [Plan] and applies it:
//
//   - release owned VMs its selector no longer matches (remove the
//     ownerReference);
//   - scale out: create VMs named <pool>-<i>, the lowest indexes no VM of
//     the namespace uses first (KubeVirt's naming), from the template's
//     labels, annotations and spec;
//   - scale in: delete the VMs spec.scaleInStrategy.proactive.selectionPolicy
//     picks (KubeVirt v1.6's policies): Random, the default, shuffles the
//     VMs and deletes the first ones; DescendingOrder deletes the highest
//     indexes first. Deletion is in the foreground (KubeVirt's
//     propagation: a VM stays, and counts, until its VMI is gone);
//   - roll a template change out once the scale is stable (rollout.go,
//     KubeVirt v1.6's two steps): VMs made from an older template get the
//     current one at once (labels, annotations and spec replaced); then
//     the VMIs of up-to-date VMs that run an older template are deleted,
//     so their run strategies start them anew — those of VMs that are not
//     Ready first, the others while at most spec.maxUnavailable (default
//     100%, at least 1) up-to-date VMs lack a ready VMI. A revision is
//     <pool>-<hash of the template>, in the label
//     kubevirt.io/vm-pool-revision-name on the VM, in its VMI template and
//     so on its VMIs; a VMI without the label (made before revisions) is
//     labelled, not restarted.
//
// spec.nameGeneration is accepted with KubeVirt's meaning (append the
// index to configMap and secret volume names); nodevirt refuses those
// volume kinds at admission, so no reference of an accepted template
// changes today.
//
// A pool never adopts orphan VMs (neither does KubeVirt's). VMs being
// deleted count as replicas and toward a scale-in. At most [BurstReplicas]
// creates or deletes per sync; creates and deletes are recorded in
// reconcile.Expectations and the pool does not scale until the VM informer
// has shown them. Paused (spec.paused) and deleted pools neither create
// nor delete (nor roll out).
//
// # Status (written by this controller only, by update of the status subresource)
//
//	replicas       owned VMs the selector matches
//	readyReplicas  of those, VMs with the Ready condition True
//	labelSelector  spec.selector as a string (the scale subresource's selector)
//	conditions     ReplicaPaused (True, reason SuccessfulPaused) while
//	               spec.paused; ReplicaFailure (True, reason FailedScaleOut,
//	               FailedScaleIn or FailedUpdate) after a sync whose creates,
//	               deletes or rollout writes failed
//
// It writes of VMs: whole objects (create, the rollout's update, delete)
// and the release of its owner reference; of VMIs: the revision label,
// and their deletion for a rollout.
//
// Concurrency: one Controller serves any number of workers; the queue
// never gives one key to two workers at once.
package pool
