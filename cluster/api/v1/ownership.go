package v1

import (
	"slices"
	"strings"
)

// Field managers: the names each writer gives the API server (PatchOptions
// and UpdateOptions FieldManager). Server-side apply tracks ownership per
// manager, so two writers of one object must never share a name.
const (
	// ManagerController is the cluster controller's VM and VMI loops.
	ManagerController = "nodevirt-controller"
	// ManagerNodeController is the cluster controller's node heartbeat loop:
	// the one writer allowed to fail a VMI whose agent is silent.
	ManagerNodeController = "nodevirt-node-controller"
	// ManagerAgent is the node agent reporting on a VMI of its node.
	ManagerAgent = "nodevirt-agent"
	// ManagerMigrationController is the cluster migration loop (cluster/migration).
	ManagerMigrationController = "nodevirt-migration-controller"
	// ManagerSourceAgent is the agent of a migration's source node writing
	// the source part of status.migrationState.
	ManagerSourceAgent = "nodevirt-agent-migration-source"
	// ManagerTargetAgent is the agent of a migration's target node writing
	// the target part of status.migrationState.
	ManagerTargetAgent = "nodevirt-agent-migration-target"
	// ManagerAPI is the subresource API server (nodevirt-api) appending VM
	// start/stop/restart requests.
	ManagerAPI = "nodevirt-api"
)

// Kinds named in the ownership table.
const (
	KindVM   = "VirtualMachine"
	KindVMI  = "VirtualMachineInstance"
	KindVMIM = "VirtualMachineInstanceMigration"
)

// StatusField is one row of the ownership table: Writer writes Path of
// objects of Kind. Path is a JSON path from the object root; a list entry
// owned on its own is written list[key=value] (the list is a map list).
//
// +k8s:deepcopy-gen=false
type StatusField struct {
	Kind   string
	Path   string
	Writer string
	// While lists the VMI phases during which Writer writes the field;
	// empty means whenever the writer runs.
	While []VirtualMachineInstancePhase
	// Exception marks a write outside the usual ownership: the node
	// controller failing a VMI whose agent is silent.
	Exception bool
	// Takeover marks a field the agent writes along with the controller:
	// a VMI whose QEMU the agent started before the controller's
	// Scheduled (node/agent/prelaunch.go) goes from Scheduling straight to
	// Running, and the agent then writes what the controller writes at
	// Scheduled (the node, the launcher pod, the Scheduled timestamp).
	// The agent applies these fields with every status it writes, with
	// the values it read, so that it owns them alongside whoever wrote
	// them first and none is removed by an apply that omits it.
	Takeover bool
	// Future marks a field or writer not implemented yet (migration).
	Future bool
	// Queue marks a list field shared as a queue (see [QueueRole]); only
	// queue rows may name a field that has another writer.
	Queue QueueRole
}

// QueueRole is a writer's part in a status list shared as a queue: the
// appenders add entries at its end, the one consumer removes the entries
// it has processed from its front. Every write of the list is a
// compare-and-swap (a JSON patch testing the list, or a patch carrying the
// resourceVersion it was computed from), so an append racing with a
// removal makes one of them fail and retry: neither is lost.
type QueueRole string

// Queue roles.
const (
	QueueAppend  QueueRole = "append"
	QueueConsume QueueRole = "consume"
)

// agentPhases are the VMI phases during which the agent owns status.phase.
var agentPhases = []VirtualMachineInstancePhase{Scheduled, Running, Unknown, Succeeded, Failed}

// StatusOwnership returns the ownership table of every status field of
// VMIs, VMs and migrations: the single source that writers consult (see
// [VirtualMachineInstanceStatus.OwnedBy]) and docs/status-ownership.md
// restates. Each call returns a fresh copy.
func StatusOwnership() []StatusField {
	out := slices.Clone(statusOwnership)
	for i := range out {
		out[i].While = slices.Clone(out[i].While)
	}
	return out
}

// statusOwnership is the table, built once: the agent and the controllers
// consult it on every status they derive.
var statusOwnership = ownershipTable()

func ownershipTable() []StatusField {
	pre := []VirtualMachineInstancePhase{VmPhaseUnset, Pending, Scheduling}
	nonFinal := []VirtualMachineInstancePhase{Pending, Scheduling, Scheduled, Running, Unknown}
	vmi := func(path, writer string, while ...VirtualMachineInstancePhase) StatusField {
		return StatusField{Kind: KindVMI, Path: path, Writer: writer, While: while}
	}
	exception := func(path string) StatusField {
		return StatusField{Kind: KindVMI, Path: path, Writer: ManagerNodeController, While: nonFinal, Exception: true}
	}
	takeover := func(path string) StatusField {
		return StatusField{Kind: KindVMI, Path: path, Writer: ManagerAgent, While: agentPhases, Takeover: true}
	}
	mig := func(path, writer string) StatusField {
		return StatusField{Kind: KindVMI, Path: path, Writer: writer, While: []VirtualMachineInstancePhase{Running}}
	}
	rows := []StatusField{
		vmi("status.phase", ManagerController, pre...),
		vmi("status.phase", ManagerAgent, agentPhases...),
		exception("status.phase"),
		vmi("status.reason", ManagerController, pre...),
		exception("status.reason"),
		vmi("status.nodeName", ManagerController, pre...),
		vmi("status.activePods", ManagerController, pre...),
		vmi("status.phaseTransitionTimestamps[phase=Pending]", ManagerController, pre...),
		vmi("status.phaseTransitionTimestamps[phase=Scheduling]", ManagerController, pre...),
		vmi("status.phaseTransitionTimestamps[phase=Scheduled]", ManagerController, pre...),
		vmi("status.phaseTransitionTimestamps[phase=Failed]", ManagerController, pre...),
		takeover("status.nodeName"),
		takeover("status.activePods"),
		takeover("status.phaseTransitionTimestamps[phase=Scheduled]"),
		vmi("status.phaseTransitionTimestamps[phase=Running]", ManagerAgent, agentPhases...),
		vmi("status.phaseTransitionTimestamps[phase=Unknown]", ManagerAgent, agentPhases...),
		vmi("status.phaseTransitionTimestamps[phase=Succeeded]", ManagerAgent, agentPhases...),
		vmi("status.phaseTransitionTimestamps[phase=Failed]", ManagerAgent, agentPhases...),
		exception("status.phaseTransitionTimestamps[phase=Failed]"),
		vmi("status.conditions[type=PodScheduled]", ManagerController, pre...),
		vmi("status.conditions[type=Synchronized]", ManagerController, pre...),
		vmi("status.volumeStatus", ManagerController, pre...),
		vmi("status.conditions[type=Ready]", ManagerAgent, agentPhases...),
		exception("status.conditions[type=Ready]"),
		vmi("status.conditions[type=Paused]", ManagerAgent, agentPhases...),
		vmi("status.conditions[type=AgentConnected]", ManagerAgent, agentPhases...),
		vmi("status.conditions[type=LiveMigratable]", ManagerAgent, agentPhases...),
		vmi("status.interfaces", ManagerAgent, agentPhases...),
		vmi("status.guestOSInfo", ManagerAgent, agentPhases...),
		vmi("status.accelerator", ManagerAgent, agentPhases...),

		// Migration (docs/migration.md): the migration controller names the
		// migration and its target and hands the VMI over to the target
		// node; the target agent reports its domain; the source agent drives
		// and ends the migration. Each writes only while a migration of
		// the VMI is under way (phase Running).
		mig("status.migrationState.migrationUid", ManagerMigrationController),
		mig("status.migrationState.sourceNode", ManagerMigrationController),
		mig("status.migrationState.sourcePod", ManagerMigrationController),
		mig("status.migrationState.targetNode", ManagerMigrationController),
		mig("status.migrationState.targetPod", ManagerMigrationController),
		mig("status.migrationState.abortRequested", ManagerMigrationController),
		mig("status.migrationState.migrationConfiguration", ManagerMigrationController),
		mig("status.nodeName", ManagerMigrationController),
		mig("status.activePods", ManagerMigrationController),
		mig("status.evacuationNodeName", ManagerMigrationController),
		mig("status.migrationState.targetNodeAddress", ManagerTargetAgent),
		mig("status.migrationState.targetNodeDomainDetected", ManagerTargetAgent),
		mig("status.migrationState.targetNodeDomainReadyTimestamp", ManagerTargetAgent),
		mig("status.migrationState.startTimestamp", ManagerSourceAgent),
		mig("status.migrationState.endTimestamp", ManagerSourceAgent),
		mig("status.migrationState.completed", ManagerSourceAgent),
		mig("status.migrationState.failed", ManagerSourceAgent),
		mig("status.migrationState.failureReason", ManagerSourceAgent),
		mig("status.migrationState.mode", ManagerSourceAgent),
		mig("status.migrationState.abortStatus", ManagerSourceAgent),
		{Kind: KindVMIM, Path: "status.phase", Writer: ManagerMigrationController},
		{Kind: KindVMIM, Path: "status.phaseTransitionTimestamps", Writer: ManagerMigrationController},
		{Kind: KindVMIM, Path: "status.conditions", Writer: ManagerMigrationController},
		{Kind: KindVMIM, Path: "status.migrationState", Writer: ManagerMigrationController},

		// `virtctl start/stop/restart` through nodevirt-api appends
		// requests; the VM controller removes them once processed.
		{Kind: KindVM, Path: "status.stateChangeRequests", Writer: ManagerAPI, Queue: QueueAppend},
		{Kind: KindVM, Path: "status.stateChangeRequests", Writer: ManagerController, Queue: QueueConsume},
	}
	for _, f := range []string{"created", "ready", "printableStatus", "conditions",
		"startFailure", "runStrategy", "observedGeneration", "desiredGeneration", "instancetypeRef", "preferenceRef",
		"snapshotInProgress", "restoreInProgress"} {
		rows = append(rows, StatusField{Kind: KindVM, Path: "status." + f, Writer: ManagerController})
	}
	return rows
}

// PhaseWriter returns the field manager that owns status.phase of a VMI in
// phase p: the controller before Scheduled, the agent from Scheduled on.
// The node controller's NodeUnresponsive exception is not an owner.
func PhaseWriter(p VirtualMachineInstancePhase) string {
	for _, f := range statusOwnership {
		if f.Kind == KindVMI && f.Path == "status.phase" && !f.Exception && slices.Contains(f.While, p) {
			return f.Writer
		}
	}
	return ""
}

// ConditionWriters returns the field managers that write VMI conditions of
// type t (the usual owner first); none for a type nodevirt does not write.
func ConditionWriters(t VirtualMachineInstanceConditionType) []string {
	var out []string
	path := "status.conditions[type=" + string(t) + "]"
	for _, f := range statusOwnership {
		if f.Kind == KindVMI && f.Path == path {
			out = append(out, f.Writer)
		}
	}
	return out
}

// ownedPaths returns the paths of kind's status that manager writes.
func ownedPaths(kind, manager string) []string {
	var out []string
	for _, f := range statusOwnership {
		if f.Kind == kind && f.Writer == manager && !f.Future {
			out = append(out, strings.TrimPrefix(f.Path, "status."))
		}
	}
	return out
}
