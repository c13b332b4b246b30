package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	migrationsv1alpha1 "github.com/nodevirt/nodevirt/cluster/api/migrations/v1alpha1"
	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/hack/testenv"
)

// TestMigrationIntegration runs the controller as a process against a real
// kube-apiserver with parallelMigrationsPerCluster 1; the test plays
// scheduler, kubelet and both node agents of each migration.
func TestMigrationIntegration(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	cm, err := c.kube.CoreV1().ConfigMaps("nodevirt").Get(ctx, "nodevirt-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["migrations"] = "parallelMigrationsPerCluster: 1\n"
	if _, err := c.kube.CoreV1().ConfigMaps("nodevirt").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	happyPathPolicies(t, c, "mig-happy")
	c.startReplica(t, "m")
	c.waitLeader(t, "m")

	t.Run("HappyPath", func(t *testing.T) { testMigrationHappyPath(t, c) })
	t.Run("NotMigratable", func(t *testing.T) { testNotMigratable(t, c) })
	t.Run("DeletedWhileRunning", func(t *testing.T) { testDeletedWhileRunning(t, c) })
	t.Run("DeletedBeforeStart", func(t *testing.T) { testDeletedBeforeStart(t, c) })
	t.Run("TargetPodDeleted", func(t *testing.T) { testTargetPodDeleted(t, c) })
	t.Run("SecondMigrationWaits", func(t *testing.T) { testSecondMigrationWaits(t, c) })
	t.Run("ClusterLimit", func(t *testing.T) { testClusterLimit(t, c) })
	t.Run("Drain", func(t *testing.T) { testDrain(t, c) })
}

// happyPathPolicies are created before the controller starts, so its
// informers hold them when the migration is planned (a policy created just
// before a migration may not be in a loaded controller's cache yet, and
// the migration then runs with the cluster's configuration, as KubeVirt's
// would). A MigrationPolicy for mig-happy's VMIs labelled app=vm beats a
// broader one.
func happyPathPolicies(t *testing.T, c *cluster, ns string) {
	t.Helper()
	for name, sel := range map[string]*migrationsv1alpha1.Selectors{
		"broad":  {VirtualMachineInstanceSelector: map[string]string{"app": "vm"}},
		"narrow": {VirtualMachineInstanceSelector: map[string]string{"app": "vm"}, NamespaceSelector: map[string]string{"kubernetes.io/metadata.name": ns}},
	} {
		timeout := map[string]int64{"broad": 7, "narrow": 42}[name]
		if _, err := c.kv.MigrationsV1alpha1().MigrationPolicies().Create(context.Background(), &migrationsv1alpha1.MigrationPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       migrationsv1alpha1.MigrationPolicySpec{Selectors: sel, CompletionTimeoutPerGiB: ptr.To(timeout), AllowPostCopy: ptr.To(true)},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create migration policy: %v", err)
		}
	}
}

func testMigrationHappyPath(t *testing.T, c *cluster) {
	ns := c.namespace(t, "mig-happy")
	t.Cleanup(func() {
		_ = c.kv.MigrationsV1alpha1().MigrationPolicies().DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{})
	})
	vmi := c.runningVM(t, ns, "vm", "node-a", true, nil)
	start := time.Now()
	m, tpod := c.prepareMigration(t, vmi, "node-b")

	// The target pod: the VMI's pod shape, for this migration, off node-a.
	if tpod.Labels[v1.MigrationJobUIDLabel] != string(m.UID) || tpod.Labels[v1.CreatedByLabel] != string(vmi.UID) {
		t.Errorf("target pod labels = %v", tpod.Labels)
	}
	if tpod.Spec.NodeSelector["zone"] != "b" || tpod.Spec.NodeSelector[v1.SchedulableLabel] != "true" {
		t.Errorf("target pod node selector = %v", tpod.Spec.NodeSelector)
	}
	aa := tpod.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	if len(aa) != 1 || aa[0].TopologyKey != corev1.LabelHostname || aa[0].LabelSelector.MatchLabels[v1.CreatedByLabel] != string(vmi.UID) {
		t.Errorf("target pod anti-affinity = %+v", aa)
	}
	if !hasString(m.Finalizers, v1.MigrationFinalizer) {
		t.Errorf("vmim finalizers = %v", m.Finalizers)
	}
	got := c.waitVMIState(t, ns, "vm", "migration named", func(v *v1.VirtualMachineInstance) bool {
		return v.Labels[v1.MigrationTargetNodeNameLabel] == "node-b" && v.Status.MigrationState != nil
	})
	ms := got.Status.MigrationState
	if ms.MigrationUID != m.UID || ms.SourceNode != "node-a" || ms.TargetNode != "node-b" || ms.TargetPod != tpod.Name || ms.SourcePod == "" {
		t.Errorf("vmi migrationState = %+v", ms)
	}
	if mc := ms.MigrationConfiguration; mc == nil || ptr.Deref(mc.CompletionTimeoutPerGiB, 0) != 42 || !ptr.Deref(mc.AllowPostCopy, false) ||
		ptr.Deref(mc.ParallelMigrationsPerCluster, 0) != 1 || ptr.Deref(mc.ProgressTimeout, 0) != v1.DefaultProgressTimeout {
		t.Errorf("migrationConfiguration: completionTimeoutPerGiB %d, allowPostCopy %t, parallelMigrationsPerCluster %d, progressTimeout %d; want 42, true, 1, %d",
			ptr.Deref(mc.CompletionTimeoutPerGiB, 0), ptr.Deref(mc.AllowPostCopy, false), ptr.Deref(mc.ParallelMigrationsPerCluster, 0),
			ptr.Deref(mc.ProgressTimeout, 0), v1.DefaultProgressTimeout)
	}
	if len(got.Status.ActivePods) != 2 {
		t.Errorf("activePods while migrating = %v, want source and target", got.Status.ActivePods)
	}

	c.targetReady(t, ns, "vm")
	c.waitPhase(t, m, v1.MigrationTargetReady)
	c.sourceStarted(t, ns, "vm")
	c.waitPhase(t, m, v1.MigrationRunning)
	c.waitPrintable(t, ns, "vm", v1.VirtualMachineStatusMigrating)

	c.agentWrite(t, ns, "vm", v1.ManagerSourceAgent, func(s *v1.VirtualMachineInstanceStatus) {
		s.MigrationState.Completed = true
		s.MigrationState.EndTimestamp = ptr.To(metav1.Now())
	})
	c.agentWrite(t, ns, "vm", v1.ManagerTargetAgent, func(s *v1.VirtualMachineInstanceStatus) {
		s.MigrationState.TargetNodeDomainDetected = true
	})
	done := c.waitPhase(t, m, v1.MigrationSucceeded)
	t.Logf("migration Pending → Succeeded in %s (test playing agents, kubelet, scheduler)", time.Since(start).Round(10*time.Millisecond))
	var phases []string
	for _, p := range done.Status.PhaseTransitionTimestamps {
		phases = append(phases, string(p.Phase))
	}
	if want := "Pending Scheduling Scheduled PreparingTarget TargetReady Running Succeeded"; strings.Join(phases, " ") != want {
		t.Errorf("phase transitions = %v, want %s", phases, want)
	}
	if ms := done.Status.MigrationState; ms == nil || !ms.Completed || ms.TargetNode != "node-b" || ms.StartTimestamp == nil {
		t.Errorf("vmim migrationState = %+v, want the VMI's", ms)
	}
	// Handoff.
	v := c.waitVMIState(t, ns, "vm", "handed over", func(v *v1.VirtualMachineInstance) bool {
		_, target := v.Labels[v1.MigrationTargetNodeNameLabel]
		return v.Status.NodeName == "node-b" && v.Labels[v1.NodeNameLabel] == "node-b" && !target
	})
	if len(v.Status.ActivePods) != 1 || v.Status.ActivePods[string(tpod.UID)] != "node-b" {
		t.Errorf("activePods after handoff = %v", v.Status.ActivePods)
	}
	full, err := c.getVMI(ns, "vm")
	if err != nil {
		t.Fatal(err)
	}
	if !managedBy(full, v1.ManagerMigrationController, "status") || !managedBy(full, v1.ManagerSourceAgent, "status") || !managedBy(full, v1.ManagerTargetAgent, "status") {
		t.Errorf("managedFields lack a migration writer: %v", managers(full))
	}
	// The source pod completes: the VMI stays Running, no new pod appears.
	src := c.launcherPodOn(t, vmi, "node-a")
	c.podPhase(t, ns, src.Name, corev1.PodSucceeded)
	c.waitPrintable(t, ns, "vm", v1.VirtualMachineStatusRunning)
	time.Sleep(2 * time.Second)
	if v, _ := c.getVMI(ns, "vm"); v.Status.Phase != v1.Running || v.UID != vmi.UID {
		t.Errorf("after the source pod completed: vmi %s phase %s", v.UID, v.Status.Phase)
	}
	pods, err := c.kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: v1.CreatedByLabel + "=" + string(vmi.UID)})
	if err != nil || len(pods.Items) != 2 {
		t.Errorf("launcher pods after handoff = %d (%v), want source and target", len(pods.Items), err)
	}
	// A final VMIM is deleted at once.
	if err := c.kv.KubevirtV1().VirtualMachineInstanceMigrations(ns).Delete(context.Background(), m.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.waitVMIMGone(t, m)

	// And back: the second migration's migrationState is fresh (the
	// agents' fields of the first are gone) and its source is node-b.
	back, _ := c.prepareMigration(t, vmi, "node-a")
	again := c.waitVMIState(t, ns, "vm", "second migration named", func(v *v1.VirtualMachineInstance) bool {
		return v.Status.MigrationState != nil && v.Status.MigrationState.MigrationUID == back.UID
	})
	if ms := again.Status.MigrationState; ms.Completed || ms.TargetNodeDomainDetected || ms.StartTimestamp != nil ||
		ms.TargetNodeAddress != "" || ms.SourceNode != "node-b" || ms.TargetNode != "node-a" || ms.SourcePod != tpod.Name {
		t.Errorf("second migrationState = %+v, want a fresh one from node-b", ms)
	}
	c.targetReady(t, ns, "vm")
	c.sourceStarted(t, ns, "vm")
	c.agentWrite(t, ns, "vm", v1.ManagerSourceAgent, func(s *v1.VirtualMachineInstanceStatus) {
		s.MigrationState.Completed = true
		s.MigrationState.EndTimestamp = ptr.To(metav1.Now())
	})
	c.agentWrite(t, ns, "vm", v1.ManagerTargetAgent, func(s *v1.VirtualMachineInstanceStatus) {
		s.MigrationState.TargetNodeDomainDetected = true
	})
	c.waitPhase(t, back, v1.MigrationSucceeded)
	c.waitVMIState(t, ns, "vm", "back on node-a", func(v *v1.VirtualMachineInstance) bool {
		return v.Status.NodeName == "node-a" && v.Labels[v1.NodeNameLabel] == "node-a" && len(v.Status.ActivePods) == 1
	})
	cleanupVMIM(t, c, back)
}

func (c *cluster) launcherPodOn(t *testing.T, vmi *v1.VirtualMachineInstance, node string) *corev1.Pod {
	t.Helper()
	pods, err := c.kube.CoreV1().Pods(vmi.Namespace).List(context.Background(), metav1.ListOptions{LabelSelector: v1.CreatedByLabel + "=" + string(vmi.UID)})
	if err != nil {
		t.Fatal(err)
	}
	for i := range pods.Items {
		if pods.Items[i].Spec.NodeName == node {
			return &pods.Items[i]
		}
	}
	t.Fatalf("no launcher pod of %s on %s", vmi.Name, node)
	return nil
}

func managedBy(o metav1.Object, manager, subresource string) bool {
	for _, f := range o.GetManagedFields() {
		if f.Manager == manager && f.Subresource == subresource {
			return true
		}
	}
	return false
}

func managers(o metav1.Object) []string {
	var out []string
	for _, f := range o.GetManagedFields() {
		out = append(out, f.Manager+"/"+string(f.Operation)+"/"+f.Subresource)
	}
	return out
}

func testNotMigratable(t *testing.T, c *cluster) {
	ns := c.namespace(t, "mig-notmigratable")
	c.runningVM(t, ns, "vm", "node-a", false, nil)
	m := c.migrate(t, ns, "vm")
	took := time.Now()
	m = c.waitPhase(t, m, v1.MigrationFailed)
	t.Logf("non-migratable VMI: VMIM Failed %s after creation", time.Since(took).Round(10*time.Millisecond))
	if r := failedReason(m); r != v1.ReasonInterfaceNotLiveMigratable {
		t.Errorf("failed reason = %q, want %s", r, v1.ReasonInterfaceNotLiveMigratable)
	}
	pods, _ := c.kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: v1.MigrationJobUIDLabel})
	if len(pods.Items) != 0 {
		t.Errorf("a target pod was created for a non-migratable VMI")
	}
}

func testDeletedWhileRunning(t *testing.T, c *cluster) {
	ns := c.namespace(t, "mig-abort")
	vmi := c.runningVM(t, ns, "vm", "node-a", true, nil)
	m, tpod := c.prepareMigration(t, vmi, "node-b")
	c.targetReady(t, ns, "vm")
	c.sourceStarted(t, ns, "vm")
	c.waitPhase(t, m, v1.MigrationRunning)
	if err := c.kv.KubevirtV1().VirtualMachineInstanceMigrations(ns).Delete(context.Background(), m.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.waitVMIState(t, ns, "vm", "abortRequested", func(v *v1.VirtualMachineInstance) bool {
		return v.Status.MigrationState != nil && v.Status.MigrationState.AbortRequested
	})
	if _, err := c.getVMIM(ns, m.Name); err != nil {
		t.Fatalf("vmim gone before the source answered the abort: %v", err)
	}
	// The source agent cancels.
	c.agentWrite(t, ns, "vm", v1.ManagerSourceAgent, func(s *v1.VirtualMachineInstanceStatus) {
		s.MigrationState.Failed = true
		s.MigrationState.AbortStatus = v1.MigrationAbortSucceeded
		s.MigrationState.EndTimestamp = ptr.To(metav1.Now())
	})
	c.waitVMIMGone(t, m)
	v := c.waitVMIState(t, ns, "vm", "target label gone", func(v *v1.VirtualMachineInstance) bool {
		_, ok := v.Labels[v1.MigrationTargetNodeNameLabel]
		return !ok
	})
	if v.Status.NodeName != "node-a" || v.Labels[v1.NodeNameLabel] != "node-a" {
		t.Errorf("aborted migration moved the VMI: nodeName %q", v.Status.NodeName)
	}
	c.waitPodGone(t, ns, tpod.Name)
}

func (c *cluster) waitPodGone(t *testing.T, ns, name string) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, "pod "+name+" deleted", func() (bool, error) {
		p, err := c.kube.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return true, nil
		}
		return p.DeletionTimestamp != nil, nil
	})
}

func testDeletedBeforeStart(t *testing.T, c *cluster) {
	ns := c.namespace(t, "mig-abort-early")
	vmi := c.runningVM(t, ns, "vm", "node-a", true, nil)
	m, tpod := c.prepareMigration(t, vmi, "node-b")
	if err := c.kv.KubevirtV1().VirtualMachineInstanceMigrations(ns).Delete(context.Background(), m.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.waitVMIMGone(t, m)
	c.waitPodGone(t, ns, tpod.Name)
	v := c.waitVMIState(t, ns, "vm", "aborted", func(v *v1.VirtualMachineInstance) bool {
		_, ok := v.Labels[v1.MigrationTargetNodeNameLabel]
		return !ok && v.Status.MigrationState != nil && v.Status.MigrationState.AbortRequested
	})
	if v.Status.NodeName != "node-a" {
		t.Errorf("nodeName = %q", v.Status.NodeName)
	}
}

func testTargetPodDeleted(t *testing.T, c *cluster) {
	ns := c.namespace(t, "mig-targetgone")
	vmi := c.runningVM(t, ns, "vm", "node-a", true, nil)
	m, tpod := c.prepareMigration(t, vmi, "node-b")
	c.targetReady(t, ns, "vm")
	if err := c.kube.CoreV1().Pods(ns).Delete(context.Background(), tpod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	m = c.waitPhase(t, m, v1.MigrationFailed)
	if r := failedReason(m); r != "TargetPodDeleted" {
		t.Errorf("failed reason = %q", r)
	}
	c.waitVMIState(t, ns, "vm", "target label gone", func(v *v1.VirtualMachineInstance) bool {
		_, ok := v.Labels[v1.MigrationTargetNodeNameLabel]
		return !ok && v.Status.NodeName == "node-a"
	})
	cleanupVMIM(t, c, m)
}

func cleanupVMIM(t *testing.T, c *cluster, m *v1.VirtualMachineInstanceMigration) {
	t.Helper()
	if err := c.kv.KubevirtV1().VirtualMachineInstanceMigrations(m.Namespace).Delete(context.Background(), m.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.waitVMIMGone(t, m)
}

func waitingMessage(m *v1.VirtualMachineInstanceMigration) string {
	for _, c := range m.Status.Conditions {
		if c.Type == "Waiting" {
			return c.Message
		}
	}
	return ""
}

func testSecondMigrationWaits(t *testing.T, c *cluster) {
	ns := c.namespace(t, "mig-second")
	vmi := c.runningVM(t, ns, "vm", "node-a", true, nil)
	first, tpod := c.prepareMigration(t, vmi, "node-b")
	second := c.migrate(t, ns, "vm")
	testenv.Eventually(t, 30*time.Second, "second vmim waits", func() (bool, error) {
		m, err := c.getVMIM(ns, second.Name)
		return err == nil && m.Status.Phase == v1.MigrationPending && strings.Contains(waitingMessage(m), first.Name), err
	})
	time.Sleep(2 * time.Second)
	if m, _ := c.getVMIM(ns, second.Name); m.Status.Phase != v1.MigrationPending {
		t.Fatalf("second vmim moved to %s while the first runs", m.Status.Phase)
	}
	// The first ends (its target pod fails): the second goes.
	c.podPhase(t, ns, tpod.Name, corev1.PodFailed)
	c.waitPhase(t, first, v1.MigrationFailed)
	c.waitTargetPod(t, second)
	c.waitPhase(t, second, v1.MigrationScheduling)
	cleanupVMIM(t, c, second)
	cleanupVMIM(t, c, first)
}

func testClusterLimit(t *testing.T, c *cluster) {
	ns := c.namespace(t, "mig-limit")
	a := c.runningVM(t, ns, "a", "node-a", true, nil)
	c.runningVM(t, ns, "b", "node-c", true, nil)
	ma, _ := c.prepareMigration(t, a, "node-b")
	mb := c.migrate(t, ns, "b")
	testenv.Eventually(t, 30*time.Second, "vmim of b waits for the cluster limit", func() (bool, error) {
		m, err := c.getVMIM(ns, mb.Name)
		return err == nil && m.Status.Phase == v1.MigrationPending && strings.Contains(waitingMessage(m), "parallelMigrationsPerCluster"), err
	})
	cleanupVMIM(t, c, ma) // deleting it before start fails it and frees the slot
	c.waitTargetPod(t, mb)
	cleanupVMIM(t, c, mb)
}

func testDrain(t *testing.T, c *cluster) {
	ctx := context.Background()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-d", Labels: map[string]string{v1.SchedulableLabel: "true"}}}
	if _, err := c.kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ns := c.namespace(t, "mig-drain")
	live := c.runningVM(t, ns, "live", "node-d", true, ptr.To(v1.EvictionStrategyLiveMigrate))
	none := c.runningVM(t, ns, "none", "node-d", true, ptr.To(v1.EvictionStrategyNone))
	pdb := c.waitPDB(t, live, 1)
	if ref := metav1.GetControllerOf(pdb); ref == nil || ref.Kind != v1.KindVMI || ref.Name != "live" || !strings.HasPrefix(pdb.Name, "kubevirt-disruption-budget-") {
		t.Errorf("pdb %s owner = %+v", pdb.Name, ref)
	}
	if pdbs, _ := c.kube.PolicyV1().PodDisruptionBudgets(ns).List(ctx, metav1.ListOptions{LabelSelector: v1.CreatedByLabel + "=" + string(none.UID)}); len(pdbs.Items) != 0 {
		t.Errorf("evictionStrategy None got a PDB")
	}
	// kubectl drain's eviction of the protected pod is refused.
	src := c.launcherPodOn(t, live, "node-d")
	if err := c.evict(src); !apierrors.IsTooManyRequests(err) {
		t.Errorf("eviction of a LiveMigrate VMI's pod: %v, want 429 (the disruption budget)", err)
	}
	// Cordon: the LiveMigrate VMI is evacuated, the None one stays.
	n, err := c.kube.CoreV1().Nodes().Get(ctx, "node-d", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Spec.Unschedulable = true
	if _, err := c.kube.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var m *v1.VirtualMachineInstanceMigration
	testenv.Eventually(t, 30*time.Second, "evacuation vmim", func() (bool, error) {
		list, err := c.kv.KubevirtV1().VirtualMachineInstanceMigrations(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for i := range list.Items {
			if list.Items[i].Spec.VMIName == "none" {
				t.Fatalf("evacuation migrated a VMI with evictionStrategy None")
			}
			if list.Items[i].Spec.VMIName == "live" {
				m = &list.Items[i]
			}
		}
		return m != nil, nil
	})
	if m.Annotations["kubevirt.io/evacuationMigration"] != "node-d" {
		t.Errorf("evacuation vmim annotations = %v", m.Annotations)
	}
	c.waitVMIState(t, ns, "live", "evacuationNodeName", func(v *v1.VirtualMachineInstance) bool {
		return v.Status.EvacuationNodeName == "node-d"
	})
	c.runTargetPod(t, m, "node-e")
	c.waitPhase(t, m, v1.MigrationPreparingTarget)
	c.waitPDB(t, live, 2) // both pods protected while migrating
	c.targetReady(t, ns, "live")
	c.sourceStarted(t, ns, "live")
	c.agentWrite(t, ns, "live", v1.ManagerSourceAgent, func(s *v1.VirtualMachineInstanceStatus) {
		s.MigrationState.Completed = true
		s.MigrationState.EndTimestamp = ptr.To(metav1.Now())
	})
	c.agentWrite(t, ns, "live", v1.ManagerTargetAgent, func(s *v1.VirtualMachineInstanceStatus) {
		s.MigrationState.TargetNodeDomainDetected = true
	})
	c.waitPhase(t, m, v1.MigrationSucceeded)
	c.waitVMIState(t, ns, "live", "moved off node-d", func(v *v1.VirtualMachineInstance) bool {
		return v.Status.NodeName == "node-e" && v.Status.EvacuationNodeName == ""
	})
	c.waitPDB(t, live, 1)
	// The source pod completes after the handoff: drain may evict it.
	c.podPhase(t, ns, src.Name, corev1.PodSucceeded)
	if err := c.evict(src); err != nil {
		t.Errorf("eviction of the completed source pod: %v", err)
	}
}

// evict posts an Eviction as kubectl drain does, once (client-go would
// retry a 429 for as long as the budget refuses).
func (c *cluster) evict(p *corev1.Pod) error {
	body := fmt.Sprintf(`{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":%q,"namespace":%q}}`, p.Name, p.Namespace)
	return c.kube.CoreV1().RESTClient().Post().Namespace(p.Namespace).Resource("pods").Name(p.Name).
		SubResource("eviction").MaxRetries(0).SetHeader("Content-Type", "application/json").Body([]byte(body)).Do(context.Background()).Error()
}

// waitPDB waits for the VMI's one PodDisruptionBudget with minAvailable want.
func (c *cluster) waitPDB(t *testing.T, vmi *v1.VirtualMachineInstance, want int) *policyv1.PodDisruptionBudget {
	t.Helper()
	var out *policyv1.PodDisruptionBudget
	testenv.Eventually(t, 30*time.Second, "pdb of "+vmi.Name, func() (bool, error) {
		list, err := c.kube.PolicyV1().PodDisruptionBudgets(vmi.Namespace).List(context.Background(), metav1.ListOptions{LabelSelector: v1.CreatedByLabel + "=" + string(vmi.UID)})
		if err != nil || len(list.Items) != 1 {
			return false, err
		}
		out = &list.Items[0]
		return out.Spec.MinAvailable != nil && out.Spec.MinAvailable.IntValue() == want && out.Spec.Selector.MatchLabels[v1.CreatedByLabel] == string(vmi.UID), nil
	})
	return out
}
