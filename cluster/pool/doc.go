// Package pool is the VirtualMachinePool controller (pool.kubevirt.io/v1alpha1):
// it keeps spec.replicas VirtualMachines created from the pool's
// virtualMachineTemplate, named <pool>-<index>, and writes the pool's
// status. It owns the VMs it creates (controller ownerReference with
// blockOwnerDeletion) and nothing else of them: the VM controller runs
// each VM's VMI by its run strategy.
//
// # Model
//
// Sync observes the pool and every VM of its namespace (informer caches),
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
//     propagation: a VM stays, and counts, until its VMI is gone).
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
// nor delete. Not implemented (absent from the schema): maxUnavailable
// and the rollout of template changes to existing VMs
// (KubeVirt updates them through ControllerRevisions); a template change
// applies to VMs created afterwards.
//
// # Status (written by this controller only, by update of the status subresource)
//
//	replicas       owned VMs the selector matches
//	readyReplicas  of those, VMs with the Ready condition True
//	labelSelector  spec.selector as a string (the scale subresource's selector)
//	conditions     ReplicaPaused (True, reason SuccessfulPaused) while
//	               spec.paused; ReplicaFailure (True, reason FailedScaleOut or
//	               FailedScaleIn) after a sync whose creates or deletes failed
//
// Concurrency: one Controller serves any number of workers; the queue
// never gives one key to two workers at once.
package pool
