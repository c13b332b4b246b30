package migration

import (
	"fmt"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/nodevirt/nodevirt/hack/testenv"
)

// phaseOrder ranks the VMIM phases (KubeVirt's order).
var phaseOrder = []string{"", "Pending", "Scheduling", "Scheduled", "PreparingTarget", "TargetReady", "Running", "Succeeded", "Failed"}

// reached reports whether phase is at or past want (a final phase counts
// as past every other).
func reached(phase, want string) bool {
	return slices.Index(phaseOrder, phase) >= slices.Index(phaseOrder, want)
}

// waitPhase polls VMIM name every 20 ms until it reaches phase (or a later
// one) and returns the phase seen.
func (s *suite) waitPhase(t *testing.T, name, phase string, timeout time.Duration) string {
	t.Helper()
	var seen string
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		m, err := s.getVMIM(t.Context(), name)
		if err == nil {
			if seen = m.Status.Phase; reached(seen, phase) {
				return seen
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("VMIM %s did not reach phase %s within %v (last %q)", name, phase, timeout, seen)
	return ""
}

// settled waits until VMI name runs on exactly one node: one live QEMU
// for it across all nodes, on the node its status names, for 10 s in a
// row. It returns that node.
func (s *suite) settled(t *testing.T, name string, timeout time.Duration) string {
	t.Helper()
	var node string
	var since time.Time
	testenv.Eventually(t, timeout, fmt.Sprintf("VMI %s running on exactly one node for 10 s", name), func() error {
		procs := s.qemuProcs(name)
		v, err := s.getVMI(t.Context(), name)
		if err != nil {
			since = time.Time{}
			return err
		}
		if len(procs) != 1 || !running(v) || procs[0].node != v.Status.NodeName {
			since = time.Time{}
			return fmt.Errorf("QEMU processes %+v, VMI %s", procs, v)
		}
		if node != procs[0].node || since.IsZero() {
			node, since = procs[0].node, time.Now()
		}
		if d := time.Since(since); d < 10*time.Second {
			return fmt.Errorf("one QEMU on %s for %v only", node, d.Round(time.Second))
		}
		return nil
	})
	return node
}

// Cancel (17): deleting the VMIM while the migration is in flight cancels
// it. Deleted before Running (target being prepared) the VMIM fails and
// the guest stays in its source QEMU; deleted while Running the source
// agent cancels the transfer (abortStatus Succeeded, guest on the source).
// A MigrationPolicy caps these migrations at 1 MiB/s, which the guest's
// dirtier outruns, so the transfer is still running when the cancel
// arrives. Either way the VM runs on exactly one node, the same guest, only
// one launcher pod is left, and once the policy is gone a migration still
// succeeds.
func testCancel(t *testing.T, s *suite) {
	const name = "cancel"
	s.kubectl(t, []byte(slowPolicy), "apply", "-f", "-")
	deletePolicy := func() {
		_, _ = s.kubectlErr(nil, "delete", "migrationpolicy", "nodevirt-e2e-slow", "--ignore-not-found")
	}
	t.Cleanup(deletePolicy)
	s.startVM(t, vmSpec{name: name, dirty: true})
	for _, point := range []string{"Scheduled", "Running"} {
		t.Run("at"+point, func(t *testing.T) { s.cancelAt(t, name, point) })
	}
	deletePolicy()
	s.migrate(t, name) // the VMI is not stuck
}

// slowPolicy limits the migrations of the Cancel scenario's VMI to 1 MiB/s.
const slowPolicy = `apiVersion: migrations.kubevirt.io/v1alpha1
kind: MigrationPolicy
metadata:
  name: nodevirt-e2e-slow
spec:
  bandwidthPerMigration: 1Mi
  selectors:
    virtualMachineInstanceSelector: {vm: cancel}
`

// cancelAt starts a migration of VMI name, deletes its VMIM once it
// reached phase and checks the outcome.
func (s *suite) cancelAt(t *testing.T, name, phase string) {
	t.Helper()
	v := s.waitVMI(t, name, time.Minute, "Running", running)
	from := v.Status.NodeName
	qemu := s.qemuProcs(name)
	if len(qemu) != 1 {
		t.Fatalf("QEMU processes of %s: %+v, want one", name, qemu)
	}
	upBefore := s.guestUptime(t, from, name)
	began := time.Now()
	vmim, _ := s.createVMIM(t, name)
	seen := s.waitPhase(t, vmim, phase, 2*time.Minute)
	if err := s.deleteVMIM(t.Context(), vmim); err != nil {
		t.Fatal(err)
	}
	t.Logf("deleted VMIM %s in phase %s, %v after creating it", vmim, seen, time.Since(began).Round(10*time.Millisecond))
	testenv.Eventually(t, 2*time.Minute, "VMIM "+vmim+" gone (finalizer removed)", func() error {
		_, err := s.getVMIM(t.Context(), vmim)
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("VMIM %s still there (%v)", vmim, err)
	})
	node := s.settled(t, name, 3*time.Minute)
	v = s.waitVMI(t, name, time.Minute, "Running on "+node, runningOn(node))
	abort := ""
	if ms := v.Status.MigrationState; ms != nil {
		abort = ms.AbortStatus
		t.Logf("migrationState after the cancel: %+v", *ms)
	}
	if seen == "Succeeded" || node != from {
		t.Fatalf("deleted the VMIM in phase %s: the VM is on %s (abortStatus %q), want it kept on the source %s",
			seen, node, abort, from)
	}
	if got := s.qemuProcs(name); len(got) != 1 || got[0].pid != qemu[0].pid {
		t.Errorf("QEMU of %s after the cancel %+v, want the source's pid %d", name, got, qemu[0].pid)
	}
	if reached(seen, "Running") && abort != "Succeeded" {
		t.Errorf("cancelled in phase %s, guest on the source: abortStatus %q, want Succeeded", seen, abort)
	}
	if up := s.guestUptime(t, node, name); up < upBefore {
		t.Errorf("guest uptime %.1f s < %.1f s before the cancel: it rebooted", up, upBefore)
	}
	testenv.Eventually(t, time.Minute, "only one live launcher pod left", func() error {
		var live []string
		for _, p := range s.launcherPods(t, v.Metadata.UID) {
			if done, _, _ := s.podGoneOrDone(t.Context(), p.Name); !done {
				live = append(live, p.Name+" on "+p.Spec.NodeName)
			}
		}
		if len(live) != 1 {
			return fmt.Errorf("live launcher pods %v", live)
		}
		return nil
	})
}

// AgentKilled (17): a real SIGKILL of the source agent and, separately, of
// the target agent, at two points of a migration (target being prepared,
// migration running): whatever the VMIM's outcome, the VM runs on exactly
// one node afterwards, the same VMI, without a reboot.
func testAgentKilled(t *testing.T, s *suite) {
	const name = "killed"
	vmi := s.startVM(t, vmSpec{name: name, dirty: true})
	uid := vmi.Metadata.UID
	for _, side := range []string{"source", "target"} {
		for _, point := range []string{"PreparingTarget", "Running"} {
			t.Run(side+"At"+point, func(t *testing.T) {
				v := s.waitVMI(t, name, time.Minute, "Running", running)
				from := v.Status.NodeName
				victim := from
				if side == "target" {
					victim = s.otherNode(t, from)
				}
				upBefore := s.guestUptime(t, from, name)
				vmim, _ := s.createVMIM(t, name)
				phase := s.waitPhase(t, vmim, point, 2*time.Minute)
				back := s.killAgent(t, victim)
				t.Logf("killed the %s agent (%s) in VMIM phase %s", side, victim, phase)
				var m *vmimView
				testenv.Eventually(t, 5*time.Minute, "VMIM "+vmim+" final", func() error {
					var err error
					if m, err = s.getVMIM(t.Context(), vmim); err != nil {
						return err
					}
					if !m.final() {
						return fmt.Errorf("%s", m)
					}
					return nil
				})
				back()
				node := s.settled(t, name, 3*time.Minute)
				t.Logf("VMIM %s ended %s; the VM runs on %s (was on %s)", vmim, m.Status.Phase, node, from)
				if want := map[string]string{"Succeeded": s.otherNode(t, from), "Failed": from}[m.Status.Phase]; node != want {
					t.Errorf("VMIM %s, VM on %s: want it on %s", m.Status.Phase, node, want)
				}
				cur := s.waitVMI(t, name, time.Minute, "Running", running)
				if cur.Metadata.UID != uid {
					t.Fatalf("VMI %s replaced (uid %s -> %s)", name, uid, cur.Metadata.UID)
				}
				if up := s.guestUptime(t, node, name); up < upBefore {
					t.Errorf("guest uptime %.1f s < %.1f s before: it rebooted", up, upBefore)
				}
				httpGetEventually(t, "http://"+cur.podIP()+":80/", time.Minute)
				if err := s.deleteVMIM(t.Context(), vmim); err != nil {
					t.Error(err)
				}
			})
		}
	}
}
