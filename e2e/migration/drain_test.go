package migration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodevirt/nodevirt/hack/testenv"
)

// NotMigratable (17): a VMI with the bridge binding on the pod network
// cannot move (its pod IP is the guest's); its LiveMigratable condition is
// False with a reason, and a VMIM for it fails at once naming that reason,
// while the VM keeps running where it is.
func testNotMigratable(t *testing.T, s *suite) {
	const name = "bridged"
	vmi := s.startVM(t, vmSpec{name: name, bridge: true})
	from := vmi.Status.NodeName
	lm := s.waitLiveMigratable(t, name, "False")
	if lm.Reason == "" {
		t.Error("LiveMigratable=False without a reason")
	}
	began := time.Now()
	vmim, vmimUID := s.createVMIM(t, name)
	var why string
	testenv.Eventually(t, 10*time.Second, "VMIM "+vmim+" Failed at once", func() error {
		m, err := s.getVMIM(t.Context(), vmim)
		if err != nil {
			return err
		}
		if m.Status.Phase != "Failed" {
			return fmt.Errorf("%s", m)
		}
		why = s.failureText(t, m, vmimUID)
		return nil
	})
	s.measure(t, "non-migratable VMIM created -> Failed: %v", time.Since(began).Round(10*time.Millisecond))
	if !strings.Contains(why, lm.Reason) && !strings.Contains(strings.ToLower(why), "bridge") {
		t.Errorf("VMIM %s failed with %q: want the reason %q (or the bridge binding) named", vmim, why, lm.Reason)
	}
	t.Logf("VMIM %s failed: %s", vmim, why)
	for _, p := range s.launcherPods(t, vmi.Metadata.UID) {
		if p.Spec.NodeName != from {
			t.Errorf("a launcher pod %s on %s was made for the failed migration", p.Name, p.Spec.NodeName)
		}
	}
	s.waitVMI(t, name, 10*time.Second, "still Running on "+from, runningOn(from))
}

// failureText gathers what the cluster says about a failed VMIM: its
// conditions, the VMI's migrationState.failureReason and the VMIM's events.
func (s *suite) failureText(t *testing.T, m *vmimView, uid string) string {
	t.Helper()
	var parts []string
	for _, c := range m.Status.Conditions {
		parts = append(parts, c.Reason+": "+c.Message)
	}
	if m.Status.MigrationState != nil && m.Status.MigrationState.FailureReason != "" {
		parts = append(parts, m.Status.MigrationState.FailureReason)
	}
	evs, err := s.kube.CoreV1().Events(namespace).List(t.Context(), metav1.ListOptions{FieldSelector: "involvedObject.uid=" + uid})
	if err == nil {
		for _, e := range evs.Items {
			parts = append(parts, e.Reason+": "+e.Message)
		}
	}
	return strings.Join(parts, "; ")
}

// Drain (18): kubectl drain of a node with two evictionStrategy:
// LiveMigrate VMs completes, and both VMs then run on the other node,
// the same VMIs, not rebooted.
func testDrain(t *testing.T, s *suite) {
	names := []string{"drain-a", "drain-b"}
	took := s.drain(t, names)
	s.measure(t, "kubectl drain of %s with %d LiveMigrate VMs: %v", s.cluster.Nodes[0].Name, len(names), took.Round(100*time.Millisecond))
}

// drain starts LiveMigrate VMs names on the first node, drains it, checks
// that every VM moved (same VMI, not rebooted, no launcher pod left on the
// drained node) and returns how long kubectl drain took.
func (s *suite) drain(t *testing.T, names []string) time.Duration {
	t.Helper()
	source := s.cluster.Nodes[0].Name
	target := s.otherNode(t, source)
	// Both VMs land on source: the other node is cordoned while they start
	// (a nodeSelector would pin the migration targets too).
	s.kubectl(t, nil, "cordon", target)
	uncordoned := false
	t.Cleanup(func() {
		if !uncordoned {
			s.kubectlErr(nil, "uncordon", target)
		}
		s.kubectlErr(nil, "uncordon", source)
	})
	var specs []vmSpec
	for _, n := range names {
		specs = append(specs, vmSpec{name: n, eviction: "LiveMigrate", dirty: true})
	}
	vmis := s.startVMs(t, specs...)
	s.kubectl(t, nil, "uncordon", target)
	uncordoned = true
	uptimes := map[string]float64{}
	for _, v := range vmis {
		if v.Status.NodeName != source {
			t.Fatalf("VM %s started on %s, want %s", v.Metadata.Name, v.Status.NodeName, source)
		}
		uptimes[v.Metadata.Name] = s.guestUptime(t, source, v.Metadata.Name)
	}

	began := time.Now()
	out, err := s.kubectlErr(nil, "drain", source, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=8m")
	t.Logf("kubectl drain %s (%v):\n%s", source, err, out)
	if err != nil {
		t.Fatalf("kubectl drain %s: %v", source, err)
	}
	took := time.Since(began)
	for i, n := range names {
		v := s.waitVMI(t, n, time.Minute, "Running on "+target, runningOn(target))
		if v.Metadata.UID != vmis[i].Metadata.UID {
			t.Errorf("VMI %s replaced (uid %s -> %s): it was restarted, not migrated", n, vmis[i].Metadata.UID, v.Metadata.UID)
		}
		if node := s.settled(t, n, time.Minute); node != target {
			t.Errorf("VM %s runs on %s, want %s", n, node, target)
		}
		if up := s.guestUptime(t, target, n); up < uptimes[n] {
			t.Errorf("guest %s uptime %.1f s < %.1f s before the drain: it rebooted", n, up, uptimes[n])
		}
		for _, p := range s.launcherPods(t, v.Metadata.UID) {
			if p.Spec.NodeName == source && p.Status.Phase == corev1.PodRunning {
				t.Errorf("launcher pod %s still running on the drained node", p.Name)
			}
		}
	}
	return took
}
