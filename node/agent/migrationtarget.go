package agent

import (
	"context"
	"errors"
	"fmt"
	"os"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/node/launchspec"
	"github.com/nodevirt/nodevirt/node/migration"
	"github.com/nodevirt/nodevirt/store"
)

// Socket names of a migration in the launcher pod's sockets directory:
// the target QEMU listens on migrationInSocket (migrate-incoming); the
// source QEMU connects to migrationOutSocket, the agent's channel proxy.
const (
	migrationInSocket  = "migration-in.sock"
	migrationOutSocket = "migration-out.sock"
)

// targetRecord is a new record's migration when o is an incoming
// migration, nil otherwise.
func (a *Agent) targetRecord(o *Observation) *store.Migration {
	ms := o.incoming()
	if ms == nil {
		return nil
	}
	return &store.Migration{UID: string(ms.MigrationUID), Role: roleTarget, State: migPreparing,
		SourceNode: ms.SourceNode, TargetNode: a.cfg.NodeName}
}

// prepareIncoming makes the target QEMU (started with -incoming defer)
// listen on its incoming socket and reports the target ready. The record
// says Listening before migrate-incoming, Ready before the status write.
func (a *Agent) prepareIncoming(ctx context.Context, o *Observation) error {
	if a.cfg.MigrationAddress == "" {
		return errors.New("no migration address configured: this node cannot be a migration target")
	}
	m := *o.Record.Migration
	mon, err := a.migrator(ctx, o)
	if err != nil {
		return err
	}
	if m.State == migPreparing {
		if err := a.update(ctx, o, func(r *store.Record) error {
			r.Migration.State, r.Migration.Address = migListening, a.cfg.MigrationAddress
			return nil
		}, a.event("MigrationTargetListening", "migration "+m.UID+" from "+m.SourceNode)); err != nil {
			return err
		}
	}
	if m.State == migPreparing || m.State == migListening {
		if err := setCapabilities(ctx, mon, targetCapabilities(o.VMI.Status.MigrationState)); err != nil {
			return err
		}
		uri := "unix:" + launchspec.DefaultPaths().Socket(migrationInSocket)
		err := mon.MigrateIncoming(ctx, uri)
		if _, serr := os.Stat(a.pod(o).Socket(migrationInSocket)); err != nil && serr != nil {
			// Not listening (an error with the socket in place means an
			// earlier migrate-incoming of this QEMU already listens).
			return fmt.Errorf("migrate-incoming: %w", err)
		}
		if err := a.exportLocalDisks(ctx, o, mon); err != nil {
			return err
		}
		if err := a.update(ctx, o, func(r *store.Record) error {
			r.Migration.State, r.Migration.Started = migReady, a.now()
			return nil
		}, a.event("MigrationTargetReady", "listening for "+m.SourceNode)); err != nil {
			return err
		}
		a.log.Info("migration target ready", "vmi", o.name(), "uid", o.UID, "migration", m.UID, "source", m.SourceNode)
	}
	return a.applyTargetStatus(ctx, o)
}

// exportLocalDisks exports the target QEMU's node-local disks for the
// source's mirrors (migrationdisks.go), when the VMI has any.
func (a *Agent) exportLocalDisks(ctx context.Context, o *Observation, mon Migrator) error {
	nodes, err := localDisks(o.Record)
	if err != nil || len(nodes) == 0 {
		return err
	}
	dm, err := diskMigrator(mon)
	if err != nil {
		return err
	}
	return exportDisks(ctx, dm, launchspec.DefaultPaths().Socket(disksInSocket), nodes)
}

// reportTargetDetected persists and reports that the target QEMU runs the
// guest.
func (a *Agent) reportTargetDetected(ctx context.Context, o *Observation) error {
	if o.Record.Migration.State != migDetected {
		// The guest runs here: its disks are complete, the source's
		// mirrors finished before the switch-over.
		if nodes, err := localDisks(o.Record); err == nil && len(nodes) > 0 {
			if mon, err := a.migrator(ctx, o); err == nil {
				if dm, err := diskMigrator(mon); err == nil {
					unexportDisks(ctx, dm, nodes)
				}
			}
		}
		if err := a.update(ctx, o, func(r *store.Record) error {
			r.Migration.State = migDetected
			return nil
		}, a.event("MigrationTargetDetected", "the guest runs here")); err != nil {
			return err
		}
		a.log.Info("migration target runs the guest", "vmi", o.name(), "uid", o.UID, "migration", o.Record.Migration.UID)
	}
	return a.applyTargetStatus(ctx, o)
}

// applyTargetStatus writes the target's migrationState fields (all of
// them, as the record says) under nodevirt-agent-migration-target.
func (a *Agent) applyTargetStatus(ctx context.Context, o *Observation) error {
	m := o.Record.Migration
	ms := &v1.VirtualMachineInstanceMigrationState{
		TargetNodeAddress:        m.Address,
		TargetNodeDomainDetected: m.State == migDetected,
	}
	if !m.Started.IsZero() {
		t := metav1.NewTime(m.Started)
		ms.TargetNodeDomainReadyTimestamp = &t
	}
	return a.applyMigrationState(ctx, o, ms, v1.ManagerTargetAgent)
}

// applyMigrationState applies ms's fields owned by manager. No
// resourceVersion precondition: these fields have this one writer.
func (a *Agent) applyMigrationState(ctx context.Context, o *Observation, ms *v1.VirtualMachineInstanceMigrationState, manager string) error {
	vmi := o.VMI.DeepCopy()
	vmi.ResourceVersion = ""
	return v1.ApplyStatus(ctx, a.deps.Virt.KubevirtV1().VirtualMachineInstances(vmi.Namespace), vmi,
		v1.VirtualMachineInstanceStatus{MigrationState: ms}, manager)
}

// Target returns the incoming migration uid this node prepared
// (node/migration.Targets): a live target record past migrate-incoming.
func (a *Agent) Target(uid string) (migration.Target, bool) {
	recs, err := a.deps.Store.List(context.Background())
	if err != nil {
		a.log.Error("migration channel: list records", "err", err)
		return migration.Target{}, false
	}
	for _, r := range recs {
		m := r.Migration
		if r.IsGone() || m == nil || m.UID != uid || m.Role != roleTarget {
			continue
		}
		if m.State != migReady && m.State != migListening {
			return migration.Target{}, false
		}
		return migration.Target{SourceNode: m.SourceNode, Socket: r.Sockets.Dir + "/" + migrationInSocket,
			DiskSocket: r.Sockets.Dir + "/" + disksInSocket}, true
	}
	return migration.Target{}, false
}
