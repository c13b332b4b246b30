package migration

import (
	"fmt"
	"time"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// slot is what admission needs to know of one migration.
type slot struct {
	UID     string
	Name    string
	VMI     string // namespace/name
	Source  string // source node (the VMI's node)
	Phase   v1.VirtualMachineInstanceMigrationPhase
	Created time.Time
}

// admit says why a Pending migration must wait ("" when it may start): at
// most one migration per VMI (the oldest Pending one goes first), at most
// perCluster migrations under way in the cluster and perNode out of one
// source node. It is pure.
func admit(self slot, others []slot, perCluster, perNode uint32) string {
	var cluster, node uint32
	for _, o := range others {
		if o.UID == self.UID || isFinal(o.Phase) {
			continue
		}
		if o.VMI == self.VMI {
			if isActive(o.Phase) {
				return fmt.Sprintf("migration %s of the VMI is in progress", o.Name)
			}
			if o.Created.Before(self.Created) || (o.Created.Equal(self.Created) && o.Name < self.Name) {
				return fmt.Sprintf("migration %s of the VMI is waiting first", o.Name)
			}
		}
		if !isActive(o.Phase) {
			continue
		}
		cluster++
		if o.Source == self.Source {
			node++
		}
	}
	switch {
	case cluster >= perCluster:
		return fmt.Sprintf("%d migrations in progress in the cluster (parallelMigrationsPerCluster %d)", cluster, perCluster)
	case node >= perNode:
		return fmt.Sprintf("%d migrations in progress out of node %s (parallelOutboundMigrationsPerNode %d)", node, self.Source, perNode)
	}
	return ""
}
