package migration

import (
	"slices"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// transitions is the VMIM phase table: the phases each phase may move to.
// Every phase may fail; Succeeded and Failed are final.
var transitions = map[v1.VirtualMachineInstanceMigrationPhase][]v1.VirtualMachineInstanceMigrationPhase{
	v1.MigrationPhaseUnset:      {v1.MigrationPending, v1.MigrationFailed},
	v1.MigrationPending:         {v1.MigrationScheduling, v1.MigrationFailed},
	v1.MigrationScheduling:      {v1.MigrationScheduled, v1.MigrationFailed},
	v1.MigrationScheduled:       {v1.MigrationPreparingTarget, v1.MigrationFailed},
	v1.MigrationPreparingTarget: {v1.MigrationTargetReady, v1.MigrationRunning, v1.MigrationSucceeded, v1.MigrationFailed},
	v1.MigrationTargetReady:     {v1.MigrationRunning, v1.MigrationSucceeded, v1.MigrationFailed},
	v1.MigrationRunning:         {v1.MigrationSucceeded, v1.MigrationFailed},
	v1.MigrationSucceeded:       nil,
	v1.MigrationFailed:          nil,
}

// canTransition reports whether a VMIM may move from one phase to another
// (staying is always allowed).
func canTransition(from, to v1.VirtualMachineInstanceMigrationPhase) bool {
	return from == to || slices.Contains(transitions[from], to)
}

// isFinal reports whether p is Succeeded or Failed.
func isFinal(p v1.VirtualMachineInstanceMigrationPhase) bool {
	return p == v1.MigrationSucceeded || p == v1.MigrationFailed
}

// isActive reports whether a VMIM in phase p holds a migration slot: it
// left Pending and has not ended.
func isActive(p v1.VirtualMachineInstanceMigrationPhase) bool {
	return p != v1.MigrationPhaseUnset && p != v1.MigrationPending && !isFinal(p)
}

// order ranks the phases along the happy path.
func order(p v1.VirtualMachineInstanceMigrationPhase) int {
	return slices.Index([]v1.VirtualMachineInstanceMigrationPhase{
		v1.MigrationPhaseUnset, v1.MigrationPending, v1.MigrationScheduling, v1.MigrationScheduled,
		v1.MigrationPreparingTarget, v1.MigrationTargetReady, v1.MigrationRunning, v1.MigrationSucceeded,
	}, p)
}
