package migration

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"time"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// EvacuationInput is what one evacuation sync of a node sees.
type EvacuationInput struct {
	Node       string
	Cordoned   bool
	VMIs       []*v1.VirtualMachineInstance // the VMIs on the node
	Migrations []*v1.VirtualMachineInstanceMigration
	Default    v1.EvictionStrategy
	PerCluster uint32
	PerNode    uint32
	Now        time.Time
	Backoff    time.Duration
}

// EvacuationPlan is what an evacuation sync does.
type EvacuationPlan struct {
	// Mark are VMIs whose status.evacuationNodeName changes (to the node
	// when cordoned, to "" when not).
	Mark []*v1.VirtualMachineInstance
	// Migrate are the VMIMs to create.
	Migrate []EvacuationMigration
	// Pending: VMIs are left to move; look again soon.
	Pending bool
}

// EvacuationMigration is one VMIM to create: its VMI and its name.
type EvacuationMigration struct {
	VMI  *v1.VirtualMachineInstance
	Name string
}

// PlanEvacuation decides which VMIs of a node to mark and migrate, within
// the free migration slots. It is pure.
func PlanEvacuation(in EvacuationInput) EvacuationPlan {
	var p EvacuationPlan
	var cluster, node uint32
	busy := map[string]bool{}          // namespace/vmi with a migration not ended
	lastFail := map[string]time.Time{} // namespace/vmi → latest failed evacuation
	attempts := map[string]int{}       // namespace/name prefix → highest attempt
	for _, m := range in.Migrations {
		if i := strings.LastIndexByte(m.Name, '-'); i > 0 {
			if n, err := strconv.Atoi(m.Name[i+1:]); err == nil {
				k := m.Namespace + "/" + m.Name[:i+1]
				attempts[k] = max(attempts[k], n)
			}
		}
		key := m.Namespace + "/" + m.Spec.VMIName
		if !isFinal(m.Status.Phase) {
			busy[key] = true
			cluster++
			if m.Status.MigrationState != nil && m.Status.MigrationState.SourceNode == in.Node || m.Annotations[EvacuationAnnotation] == in.Node {
				node++
			}
			continue
		}
		if m.Status.Phase == v1.MigrationFailed && m.Annotations[EvacuationAnnotation] == in.Node {
			if t := phaseTime(m, v1.MigrationFailed); t.After(lastFail[key]) {
				lastFail[key] = t
			}
		}
	}
	for _, vm := range in.VMIs {
		key := vm.Namespace + "/" + vm.Name
		if !in.Cordoned {
			if vm.Status.EvacuationNodeName == in.Node {
				p.Mark = append(p.Mark, vm)
			}
			continue
		}
		if !evacuable(vm, in.Default) || vm.Status.NodeName != in.Node {
			continue
		}
		p.Pending = true
		if vm.Status.EvacuationNodeName != in.Node {
			p.Mark = append(p.Mark, vm)
		}
		if busy[key] || in.Now.Sub(lastFail[key]) < in.Backoff || cluster >= in.PerCluster || node >= in.PerNode {
			continue
		}
		prefix := evacuationPrefix(vm)
		p.Migrate = append(p.Migrate, EvacuationMigration{VMI: vm, Name: prefix + strconv.Itoa(attempts[vm.Namespace+"/"+prefix]+1)})
		cluster++
		node++
	}
	return p
}

// evacuable: a running VMI whose eviction strategy asks to migrate it.
func evacuable(vm *v1.VirtualMachineInstance, def v1.EvictionStrategy) bool {
	if vm.DeletionTimestamp != nil || vm.Status.Phase != v1.Running {
		return false
	}
	switch EvictionStrategy(vm, def) {
	case v1.EvictionStrategyLiveMigrate:
		return true
	case v1.EvictionStrategyLiveMigrateIfPossible:
		ok, _, _ := liveMigratable(vm)
		return ok
	}
	return false
}

func phaseTime(m *v1.VirtualMachineInstanceMigration, p v1.VirtualMachineInstanceMigrationPhase) time.Time {
	return statusPhaseTime(m.Status, p)
}

// statusPhaseTime is when s last entered phase p (zero: never).
func statusPhaseTime(s v1.VirtualMachineInstanceMigrationStatus, p v1.VirtualMachineInstanceMigrationPhase) time.Time {
	var at time.Time
	for _, t := range s.PhaseTransitionTimestamps {
		if t.Phase == p {
			at = t.PhaseTransitionTimestamp.Time
		}
	}
	return at
}

// evacuationPrefix starts the names of a VMI's evacuation VMIMs, which end
// in the attempt number. The names are fixed so that creating one twice
// (a cache that lags, a leader that just took over) yields one VMIM: a
// cache missing the latest attempt names it again and the API server
// refuses the copy. The VMI's UID keeps a VMI recreated under the same
// name apart.
func evacuationPrefix(vm *v1.VirtualMachineInstance) string {
	return EvacuationPrefix + uidHash(vm) + "-"
}

// uidHash is a short stable stand-in for a VMI's UID in the names of what
// the migration controller creates for it.
func uidHash(vm *v1.VirtualMachineInstance) string {
	sum := sha256.Sum256([]byte(vm.UID))
	return hex.EncodeToString(sum[:])[:10]
}
