// Package migration is the cluster side of live migration
// (docs/migration.md is the contract with the node agents): the
// VirtualMachineInstanceMigration (VMIM) controller, the disruption budgets
// of VMIs that must not be evicted, and KubeVirt's evacuation of cordoned
// nodes. It writes under the field manager nodevirt-migration-controller.
//
// # Migrations (Controller, keyed by VMIM namespace/name)
//
// Observe (informer caches: the VMIM, its VMI, the VMI's launcher pods, all
// VMIMs for the limits) → [Plan] (pure, table-tested) → apply → report. The
// phases and their allowed moves are one table (transitions in phase.go):
//
//	Pending → Scheduling → Scheduled → PreparingTarget → TargetReady → Running → Succeeded
//	   └──────────┴────────────┴─────────────┴───────────────┴───────────┴─────→ Failed
//
// Pending: finalizer kubevirt.io/migrationJobFinalize added. A VMI still
// starting (Pending, Scheduling, Scheduled) keeps the VMIM Pending with a
// Waiting condition for up to a minute after the VMIM's creation, so a VMIM
// created as its VMI turns Running does not lose the race with the cache. A
// VMI that is not Running after that, or whose LiveMigratable condition is
// not True, fails the VMIM (condition Failed with the VMI condition's reason
// and message). A
// VMI with another migration under way (or an older Pending one), or a
// cluster past parallelMigrationsPerCluster migrations under way, or a
// source node past parallelOutboundMigrationsPerNode, keeps the VMIM Pending
// with a Waiting condition saying why. Otherwise the target pod is created
// (vmi.RenderTargetPod: the VMI's pod shape, a fixed name
// virt-launcher-<vmi>-mig-<uid prefix> so a lagging cache never yields two,
// label kubevirt.io/migrationJobUID, disk images pinned to the source pod's
// digests, required anti-affinity to the VMI's pods by hostname,
// spec.addedNodeSelector merged) and the phase is Scheduling. Scheduled: the
// target pod runs. PreparingTarget: the controller wrote the VMI's
// migrationState afresh (migrationUid, sourceNode, sourcePod, targetNode,
// targetPod, migrationConfiguration: defaults ← controller configuration ←
// the matching MigrationPolicy), added the target pod to status.activePods
// and labelled the VMI kubevirt.io/migrationTargetNodeName. TargetReady:
// the target agent set targetNodeAddress and
// targetNodeDomainReadyTimestamp. Running: the source agent set
// startTimestamp. Succeeded: completed and targetNodeDomainDetected; the
// controller hands the VMI over (label kubevirt.io/nodeName and
// status.nodeName = target, activePods = the target pod,
// evacuationNodeName cleared, the target label removed).
//
// Failed: the source reported failed, the target pod was deleted or ended,
// it was unschedulable for 5 minutes or not running 15 minutes after its
// creation (KubeVirt's annotations kubevirt.io/migrationUnschedulablePodTimeoutSeconds
// and kubevirt.io/migrationPendingPodTimeoutSeconds on the VMIM change
// both, per migration), the VMI stopped, or the VMIM was deleted before the migration
// started. The target pod is deleted, the target label and the target's
// activePods entry removed; if the agents already knew of the migration,
// abortRequested is set so the source never starts it. Deleting a VMIM
// whose migration runs sets abortRequested (condition
// migrationAbortRequested) and waits for the source's outcome: failed →
// Failed, completed → Succeeded (the migration stands). A final VMIM being
// deleted loses its finalizer.
//
// Writes, in order, each guarded by the resourceVersion the previous one
// returned: VMIM finalizers (update); target pod create/delete; VMI labels
// (merge patch); an earlier migration's VMI migrationState removed (JSON
// patch testing its migrationUid, so agents' stale fields go too); the VMI
// status fields this package owns (v1.ApplyStatus, server-side apply):
// migrationState.{migrationUid, sourceNode, sourcePod, targetNode,
// targetPod, abortRequested, migrationConfiguration}, nodeName (at
// handoff), activePods (while migrating and at handoff; an atomic map) and
// evacuationNodeName; last the VMIM status (server-side apply, all of it:
// phase, phaseTransitionTimestamps, conditions Failed / Waiting /
// migrationAbortRequested, and migrationState mirroring the VMI's).
//
// # Disruption budgets (DisruptionBudgets, keyed by VMI)
//
// A VMI whose eviction strategy (spec.evictionStrategy, else the cluster
// default) is LiveMigrate or External, or LiveMigrateIfPossible while
// LiveMigratable, gets one PodDisruptionBudget kubevirt-disruption-budget-*
// owned by it, selecting kubevirt.io/created-by=<VMI UID>, minAvailable 1
// (2 while a migration has a target pod, so neither pod is evicted
// mid-flight). `kubectl drain` is refused for its pod; a source pod that
// completed after a handoff is terminal, which the eviction API deletes
// regardless of budgets. None (the default): no budget.
//
// # Evacuation (Evacuation, keyed by node)
//
// A node with spec.unschedulable or the taint kubevirt.io/drain:NoSchedule
// is evacuated: its Running VMIs with strategy LiveMigrate (or
// LiveMigrateIfPossible and migratable) get status.evacuationNodeName and,
// within the parallel limits, a VMIM kubevirt-evacuation-<uid hash>-<attempt>
// annotated kubevirt.io/evacuationMigration=<node>; a failed one is retried
// after 30 s. The name is fixed per attempt, so a lagging cache or a new
// leader never makes two.
// [PlanEvacuation] is pure.
//
// Concurrency: each loop's queue never hands one key to two workers; the
// three loops coordinate only through the API server (resourceVersion
// preconditions and server-side apply).
package migration
