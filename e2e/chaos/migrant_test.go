package chaos

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/cluster/migration"
)

// migrant is the VM live-migrated back and forth between the two nodes
// for the whole run, through the faults on the run's node.
const migrant = "migrant"

// Migration pacing: the pause between two migrations, and how long one
// may take to end (Succeeded or Failed), faults included. The controller
// fails a migration whose target pod does not run within
// targetPendingTimeout (targetUnschedulableTimeout while unschedulable),
// or whose target does not get its domain ready within the cluster's
// progressTimeout after that: the deadline is those bounds and a minute
// for the controller to notice (its resync, its backoff after an API
// server outage) and the agents to report. A migration that outlives them
// is stuck.
const (
	migrateEvery               = 10 * time.Second
	targetUnschedulableTimeout = time.Minute
	targetPendingTimeout       = 2 * time.Minute
	migrateDeadline            = targetPendingTimeout + time.Duration(v1.DefaultProgressTimeout)*time.Second + time.Minute
)

// bootIDLine is what the guest prints for bootIDCommand: its kernel's
// boot ID, which a reboot changes and a live migration keeps. The typed
// command does not match it (the quotes split the marker).
var bootIDLine = regexp.MustCompile(`BOOT=([0-9a-f-]{36})`)

const bootIDCommand = `echo BO""OT=$(cat /proc/sys/kernel/random/boot_id)`

// startMigrant starts the migrant, free to run on either node.
func (h *harness) startMigrant(t *testing.T) {
	t.Helper()
	if _, err := h.cluster.KubectlText(time.Minute, h.vmManifest(migrant, migrant, ""), "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	err := await(t.Context(), 4*time.Minute, func() error {
		vmi, err := h.virt.KubevirtV1().VirtualMachineInstances(namespace).Get(t.Context(), migrant, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if vmi.Status.Phase != v1.Running || !conditionTrue(vmi, v1.VirtualMachineInstanceIsMigratable) {
			return fmt.Errorf("VMI %s phase %q, not yet migratable", migrant, vmi.Status.Phase)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("VM %s: %v", migrant, err)
	}
}

// migrate migrates the migrant, again and again until ctx ends, and
// records every migration. Its guest must never reboot (the boot ID read
// through its console stays the same) and its VMI must stay the same and
// Running, whatever a migration's outcome; a migration that does not end
// within migrateDeadline is a violation. Failures are judged at the end
// (checkMigrations), against the faults injected meanwhile.
func (h *harness) migrate(ctx context.Context) {
	// The guest may still be booting (what is typed before its console
	// shell runs is lost): retry, as after each migration.
	var first string
	err := await(ctx, 2*time.Minute, func() (err error) {
		first, err = h.bootID(ctx)
		return err
	})
	if ctx.Err() != nil {
		return
	}
	if err != nil {
		h.violate(fmt.Sprintf("migrant: boot ID: %v", err))
		return
	}
	vmi, err := h.virt.KubevirtV1().VirtualMachineInstances(namespace).Get(ctx, migrant, metav1.GetOptions{})
	if err != nil {
		h.violate(fmt.Sprintf("migrant: %v", err))
		return
	}
	uid := vmi.UID
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(migrateEvery):
		}
		m, ok := h.migrateOnce(ctx, uid)
		if !ok {
			return
		}
		h.mu.Lock()
		h.report.Migrations = append(h.report.Migrations, m)
		h.mu.Unlock()
		if m.Phase != string(v1.MigrationSucceeded) && m.Phase != string(v1.MigrationFailed) {
			why := ""
			if vmi, err := h.virt.KubevirtV1().VirtualMachineInstances(namespace).Get(context.WithoutCancel(ctx), migrant, metav1.GetOptions{}); err == nil {
				why = h.describePods(context.WithoutCancel(ctx), vmi) + h.describeMigration(context.WithoutCancel(ctx), m.Name, vmi)
			}
			h.violate(fmt.Sprintf("migrant: migration %s (%s → %s) not ended within %v: phase %s%s", m.Name, m.From, m.To, migrateDeadline, m.Phase, why))
			return
		}
		// The guest lives on: same VMI, Running, not rebooted. This is
		// checked even when the run ended during the migration, so every
		// call uses a context the run's end does not cancel.
		live := context.WithoutCancel(ctx)
		err := await(live, time.Minute, func() error {
			vmi, err := h.virt.KubevirtV1().VirtualMachineInstances(namespace).Get(live, migrant, metav1.GetOptions{})
			switch {
			case err != nil:
				return err
			case vmi.UID != uid:
				return fmt.Errorf("VMI replaced (%s, was %s)", vmi.UID, uid)
			case vmi.Status.Phase != v1.Running:
				return fmt.Errorf("VMI phase %q", vmi.Status.Phase)
			}
			id, err := h.bootID(live)
			if err != nil {
				return err
			}
			if id != first {
				return fmt.Errorf("guest rebooted: boot ID %s, was %s", id, first)
			}
			return nil
		})
		if err != nil {
			h.violate(fmt.Sprintf("migrant: after migration %s (%s → %s, %s): %v", m.Name, m.From, m.To, m.Phase, err))
			return
		}
	}
}

// migrateOnce runs one migration of the migrant's VMI uid to its end; ok
// is false when the run ended before it did.
func (h *harness) migrateOnce(ctx context.Context, uid types.UID) (Migration, bool) {
	began := time.Now()
	m := Migration{At: began.Sub(h.start)}
	var vmim *v1.VirtualMachineInstanceMigration
	err := await(ctx, migrateDeadline, func() error {
		vmi, err := h.virt.KubevirtV1().VirtualMachineInstances(namespace).Get(ctx, migrant, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if vmi.UID != uid || vmi.Status.Phase != v1.Running {
			return fmt.Errorf("VMI %s phase %q", vmi.UID, vmi.Status.Phase)
		}
		m.From = vmi.Status.NodeName
		vmim, err = h.virt.KubevirtV1().VirtualMachineInstanceMigrations(namespace).Create(ctx, &v1.VirtualMachineInstanceMigration{
			// A target pod that cannot start fails the migration well
			// within its deadline (KubeVirt's 5 and 15 minutes are longer).
			ObjectMeta: metav1.ObjectMeta{GenerateName: "chaos-migrate-", Annotations: map[string]string{
				migration.AnnotationUnschedulableTimeout: seconds(targetUnschedulableTimeout),
				migration.AnnotationPendingTimeout:       seconds(targetPendingTimeout)}},
			Spec: v1.VirtualMachineInstanceMigrationSpec{VMIName: migrant},
		}, metav1.CreateOptions{})
		return err
	})
	if ctx.Err() != nil {
		return m, false
	}
	if err != nil {
		m.Phase, m.Reason, m.Took = "NotCreated", err.Error(), time.Since(began)
		return m, true
	}
	m.Name = vmim.Name
	// Once created, the migration is followed to its end even after the
	// run ended (with a context the run's end does not cancel): none is
	// left behind.
	follow := context.WithoutCancel(ctx)
	_ = await(follow, time.Until(began.Add(migrateDeadline)), func() error {
		got, err := h.virt.KubevirtV1().VirtualMachineInstanceMigrations(namespace).Get(follow, vmim.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		vmim = got
		if vmim.Status.Phase != v1.MigrationSucceeded && vmim.Status.Phase != v1.MigrationFailed {
			return fmt.Errorf("phase %s", vmim.Status.Phase)
		}
		return nil
	})
	m.Took = time.Since(began)
	m.Phase = string(vmim.Status.Phase)
	if s := vmim.Status.MigrationState; s != nil {
		m.To = s.TargetNode
		m.Reason = s.FailureReason
	}
	for _, c := range vmim.Status.Conditions {
		if m.Reason == "" && c.Type == migration.ConditionFailed {
			m.Reason = c.Reason + ": " + c.Message
		}
	}
	return m, true
}

// seconds is d as a migration annotation's value.
func seconds(d time.Duration) string { return strconv.Itoa(int(d / time.Second)) }

// bootID reads the migrant's boot ID through its serial console, through
// the cluster.
func (h *harness) bootID(ctx context.Context) (string, error) {
	out, err := h.consoleRun(ctx, migrant, bootIDCommand, bootIDLine)
	if err != nil {
		return "", err
	}
	return bootIDLine.FindStringSubmatch(out)[1], nil
}

// checkMigrations judges the failed migrations: each must have a fault
// injected while it ran (or just before) to explain it.
func (h *harness) checkMigrations() {
	h.mu.Lock()
	var unexplained []Migration
	for i, m := range h.report.Migrations {
		if m.Phase == string(v1.MigrationSucceeded) {
			continue
		}
		if f, ok := faultDuring(h.report.Outcomes, m.At-explainBefore, m.At+m.Took); ok {
			h.report.Migrations[i].Fault = fmt.Sprintf("fault %d (%s, at %v)", f.Seq, f.Kind, f.At.Round(time.Second))
			continue
		}
		unexplained = append(unexplained, m)
	}
	h.mu.Unlock()
	for _, m := range unexplained {
		h.violate(fmt.Sprintf("migrant: migration %s (%s → %s, at %v) %s with no fault to explain it: %s",
			m.Name, m.From, m.To, m.At.Round(time.Second), m.Phase, m.Reason))
	}
}

// explainBefore: a fault this long before a migration began still explains
// its failure (the component it hit was still recovering).
const explainBefore = time.Minute

// faultDuring finds a fault injected in [from, to].
func faultDuring(outcomes []Outcome, from, to time.Duration) (Outcome, bool) {
	for _, o := range outcomes {
		if o.At >= from && o.At <= to {
			return o, true
		}
	}
	return Outcome{}, false
}
