package migration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/cluster/vmi"
	"github.com/nodevirt/nodevirt/e2e/localcluster"
	"github.com/nodevirt/nodevirt/hack/testenv"
)

// otherNode is the cluster's first node that is not node.
func (s *suite) otherNode(t *testing.T, node string) string {
	t.Helper()
	for _, n := range s.cluster.Nodes {
		if n.Name != node {
			return n.Name
		}
	}
	t.Fatalf("no node other than %s", node)
	return ""
}

// createVMIM asks for a migration of VMI vmi and returns the VMIM's name
// and UID.
func (s *suite) createVMIM(t *testing.T, vmi string) (name, uid string) {
	t.Helper()
	m, err := s.virt.KubevirtV1().VirtualMachineInstanceMigrations(namespace).Create(t.Context(), &v1.VirtualMachineInstanceMigration{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "mig-" + vmi + "-"},
		Spec:       v1.VirtualMachineInstanceMigrationSpec{VMIName: vmi},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create VMIM for %s: %v", vmi, err)
	}
	return m.Name, string(m.UID)
}

func (s *suite) getVMIM(ctx context.Context, name string) (*vmimView, error) {
	var m vmimView
	return &m, s.getRaw(ctx, "virtualmachineinstancemigrations", name, &m)
}

func (m *vmimView) final() bool { return m.Status.Phase == "Succeeded" || m.Status.Phase == "Failed" }

func (m *vmimView) String() string {
	var conds []string
	for _, c := range m.Status.Conditions {
		conds = append(conds, fmt.Sprintf("%s=%s(%s: %s)", c.Type, c.Status, c.Reason, c.Message))
	}
	return fmt.Sprintf("VMIM %s phase=%s conditions=%v", m.Metadata.Name, m.Status.Phase, conds)
}

// phaseAt is when the VMIM entered phase (zero when it did not).
func (m *vmimView) phaseAt(phase string) time.Time {
	for _, p := range m.Status.PhaseTransitionTimestamps {
		if p.Phase == phase {
			return p.Time.Time
		}
	}
	return time.Time{}
}

// hop is one finished migration and what it measured.
type hop struct {
	vmi      *vmiView // after the migration
	vmim     *vmimView
	from, to string
	total    time.Duration // VMIM created -> Succeeded seen
	downtime time.Duration // longest gap of HTTP answers
}

// migrate moves VMI name from its node to the other one and checks the
// contract of a successful migration: VMIM Succeeded, migrationState
// filled, status.nodeName on the target, the guest not rebooted, its HTTP
// service answering at the target pod's IP, the source QEMU and pod gone
// and nothing left on the source node.
func (s *suite) migrate(t *testing.T, name string) hop {
	t.Helper()
	before := s.waitVMI(t, name, 30*time.Second, "Running", running)
	from, uid := before.Status.NodeName, before.Metadata.UID
	to := s.otherNode(t, from)
	srcPod := s.activePod(t, uid, from)
	srcQEMU := s.qemuProcs(name)
	if len(srcQEMU) != 1 || srcQEMU[0].node != from {
		t.Fatalf("VMI %s before migrating: QEMU processes %+v, want one on %s", name, srcQEMU, from)
	}
	upBefore := s.guestUptime(t, from, name)

	probe := newProber()
	probe.add(srcPod.Status.PodIP)
	created := time.Now()
	vmimName, vmimUID := s.createVMIM(t, name)
	var vmim *vmimView
	testenv.Eventually(t, 5*time.Minute, fmt.Sprintf("VMIM %s of %s (%s -> %s) to finish", vmimName, name, from, to), func() error {
		// Probe the target pod as soon as the VMI names it.
		if v, err := s.getVMI(t.Context(), name); err == nil && v.Status.MigrationState != nil && v.Status.MigrationState.TargetPod != "" {
			if p, err := s.kube.CoreV1().Pods(namespace).Get(t.Context(), v.Status.MigrationState.TargetPod, metav1.GetOptions{}); err == nil {
				probe.add(p.Status.PodIP)
			}
		}
		m, err := s.getVMIM(t.Context(), vmimName)
		if err != nil {
			return err
		}
		if vmim = m; !m.final() {
			return fmt.Errorf("%s", m)
		}
		return nil
	})
	total := time.Since(created)
	if vmim.Status.Phase != "Succeeded" {
		probe.stop()
		t.Fatalf("migration of %s %s -> %s: %s", name, from, to, vmim)
	}
	after := s.waitVMI(t, name, time.Minute, "running on "+to+" with a completed migrationState", func(v *vmiView) bool {
		m := v.Status.MigrationState
		return runningOn(to)(v) && m != nil && m.Completed && m.MigrationUID == vmimUID && m.EndTimestamp != nil
	})
	dstPod := s.activePod(t, uid, to)
	// The service answers at the new address before the probe stops.
	httpGetEventually(t, "http://"+dstPod.Status.PodIP+":80/", time.Minute)
	gap, gapAt, answers, fails := probe.stop()

	ms := after.Status.MigrationState
	if ms.SourceNode != from || ms.TargetNode != to || ms.TargetPod != dstPod.Name || ms.Failed {
		t.Errorf("migrationState %+v, want source %s, target %s, target pod %s, not failed", *ms, from, to, dstPod.Name)
	}
	if after.Metadata.UID != uid {
		t.Errorf("VMI %s replaced (uid %s -> %s)", name, uid, after.Metadata.UID)
	}
	if got, left := after.Metadata.Labels["kubevirt.io/nodeName"], after.Metadata.Labels["kubevirt.io/migrationTargetNodeName"]; got != to || left != "" {
		t.Errorf("VMI %s labels kubevirt.io/nodeName=%q kubevirt.io/migrationTargetNodeName=%q, want %q and none", name, got, left, to)
	}
	// status.interfaces is the target agent's to write once it owns the
	// VMI: it follows the handoff by one sync.
	handedOff := time.Now()
	after = s.waitVMI(t, name, 30*time.Second, "interface address "+dstPod.Status.PodIP+" (the target pod's)", func(v *vmiView) bool {
		return v.podIP() == dstPod.Status.PodIP
	})
	ifaceLag := time.Since(handedOff)
	checkSameAccelerator(t, before, after, &srcPod, &dstPod)
	s.checkNotRebooted(t, to, name, dstPod.Name, upBefore, created)
	s.checkSourceGone(t, name, uid, from, srcPod.Name, srcQEMU[0].pid)

	h := hop{vmi: after, vmim: vmim, from: from, to: to, total: total, downtime: gap}
	var qmpView string
	if ms.StartTimestamp != nil {
		qmpView = fmt.Sprintf(", migrationState start->end %v", ms.EndTimestamp.Sub(ms.StartTimestamp.Time))
	}
	if run, done := vmim.phaseAt("Running"), vmim.phaseAt("Succeeded"); !run.IsZero() && !done.IsZero() {
		qmpView += fmt.Sprintf(", VMIM Running->Succeeded %v", done.Sub(run))
	}
	s.measure(t, "migration %s %s -> %s (mode %q): total %v (VMIM created -> Succeeded)%s; downtime %v (longest gap of HTTP answers at %s, %d answers, %d failed probes); handoff seen -> interface address updated %v",
		name, from, to, ms.Mode, total.Round(10*time.Millisecond), qmpView, gap.Round(time.Millisecond),
		gapAt.Format("15:04:05.000"), answers, fails, ifaceLag.Round(time.Millisecond))
	return h
}

// checkSameAccelerator checks that the guest kept its accelerator across
// the migration (a guest cannot move between KVM and TCG): the target pod
// requests /dev/kvm exactly when the source pod did, an emulated target is
// kept off KVM nodes (useEmulation auto, the deployed default), and the
// VMI's status.accelerator is unchanged.
func checkSameAccelerator(t *testing.T, before, after *vmiView, src, dst *corev1.Pod) {
	t.Helper()
	if before.Status.Accelerator == "" || after.Status.Accelerator != before.Status.Accelerator {
		t.Errorf("status.accelerator %q before the migration, %q after; want it set and the same", before.Status.Accelerator, after.Status.Accelerator)
	}
	if s, d := v1.RequestsKVM(src), v1.RequestsKVM(dst); s != d {
		t.Errorf("source pod %s requests /dev/kvm: %t, target pod %s: %t", src.Name, s, dst.Name, d)
	}
	if !v1.RequestsKVM(dst) && !vmi.KeptOffKVMNodes(dst) {
		t.Errorf("emulated target pod %s is not kept off KVM nodes (affinity %+v)", dst.Name, dst.Spec.Affinity)
	}
}

// checkNotRebooted checks that the guest's uptime went on across the
// migration and that its console on the target pod never showed a boot.
func (s *suite) checkNotRebooted(t *testing.T, node, name, pod string, upBefore float64, since time.Time) {
	t.Helper()
	up := s.guestUptime(t, node, name)
	if up < upBefore {
		t.Errorf("guest %s uptime %.1f s after the migration < %.1f s before: it rebooted", name, up, upBefore)
	}
	t.Logf("guest %s uptime %.1f s -> %.1f s (%.1f s of wall time)", name, upBefore, up, time.Since(since).Seconds())
	p, err := s.kube.CoreV1().Pods(namespace).Get(t.Context(), pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	log := readFile(filepath.Join(s.socketsDir(t, *p), "serial.log"))
	if strings.Contains(log, "NODEVIRT-GUEST-READY") {
		t.Errorf("target pod %s's console shows a guest boot:\n%s", pod, lastBytes([]byte(log), 8000))
	}
	for _, oops := range []string{"Oops", "BUG:", "Kernel panic"} {
		if i := strings.Index(log, oops); i >= 0 {
			t.Errorf("the guest's kernel reports %q on target pod %s (its memory arrived damaged):\n%s", oops, pod, log[i:min(len(log), i+3000)])
			break
		}
	}
}

// checkSourceGone checks that the VMI left nothing on node: the source
// QEMU is gone, the source pod completed (or was deleted), no process of
// the pod is left (so its network namespace, with the tap and the
// nftables table the agent made in it, is gone), no socket is left in its
// sockets directory, and the agent's store holds no live record of the
// VMI (a tombstone is fine).
func (s *suite) checkSourceGone(t *testing.T, name, uid, node, pod string, qemuPid int) {
	t.Helper()
	testenv.Eventually(t, time.Minute, fmt.Sprintf("source QEMU %d of %s on %s gone", qemuPid, name, node), func() bool {
		return !localcluster.ProcessAlive(qemuPid)
	})
	var podUID string
	if p, err := s.kube.CoreV1().Pods(namespace).Get(t.Context(), pod, metav1.GetOptions{}); err == nil {
		podUID = string(p.UID)
	}
	var phase string
	testenv.Eventually(t, time.Minute, fmt.Sprintf("source pod %s completed or deleted", pod), func() error {
		done, ph, err := s.podGoneOrDone(t.Context(), pod)
		if phase = ph; err != nil || done {
			return err
		}
		return fmt.Errorf("source pod %s phase %s", pod, phase)
	})
	if phase == string(corev1.PodFailed) {
		// KubeVirt's source pods complete: the guest moved, nothing failed.
		t.Errorf("source pod %s ended Failed after its guest migrated away, want Succeeded", pod)
	}
	if podUID != "" {
		testenv.Eventually(t, time.Minute, fmt.Sprintf("no process of source pod %s left", pod), func() error {
			left, err := localcluster.PodProcesses(podUID)
			if err == nil && len(left) > 0 {
				err = fmt.Errorf("processes %v", left)
			}
			return err
		})
		_, root := s.nodeDir(t, node)
		dir := filepath.Join(root, "pods", podUID, "volumes", "kubernetes.io~empty-dir", "sockets")
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if e.Type()&os.ModeSocket != 0 {
				t.Errorf("socket %s left in the source pod's sockets directory", filepath.Join(dir, e.Name()))
			}
		}
	}
	testenv.Eventually(t, time.Minute, fmt.Sprintf("no live record of %s in the agent's store on %s", name, node), func() error {
		code, body, err := s.nodeAPI(t.Context(), t, node, http.MethodGet, "/nodectl/v1/domains", nil)
		if err != nil || code != http.StatusOK {
			return fmt.Errorf("list domains: %v HTTP %d %s", err, code, body)
		}
		var recs []struct {
			UID  string `json:"uid"`
			Gone string `json:"gone"`
		}
		if err := json.Unmarshal(body, &recs); err != nil {
			return fmt.Errorf("list domains: %w: %s", err, body)
		}
		for _, r := range recs {
			if r.UID == uid && r.Gone == "" {
				return fmt.Errorf("record %s is live", uid)
			}
		}
		return nil
	})
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// deleteVMIM deletes VMIM name; a missing one is fine.
func (s *suite) deleteVMIM(ctx context.Context, name string) error {
	err := s.virt.KubevirtV1().VirtualMachineInstanceMigrations(namespace).Delete(ctx, name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// RoundTrip (17): a guest dirtying its memory migrates A -> B -> A.
func testRoundTrip(t *testing.T, s *suite) {
	const name = "roundtrip"
	vmi := s.startVM(t, vmSpec{name: name, dirty: true})
	home := vmi.Status.NodeName
	first := s.migrate(t, name)
	second := s.migrate(t, name)
	if first.to == home || second.to != home {
		t.Errorf("hops %s -> %s -> %s, want %s -> other -> %s", first.from, first.to, second.to, home, home)
	}
}
