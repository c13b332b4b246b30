package controller_test

import (
	"context"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/hack/testenv"
)

func newVM(ns, name string, strategy v1.VirtualMachineRunStrategy) *v1.VirtualMachine {
	mem := resource.MustParse("128Mi")
	return &v1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.VirtualMachineSpec{
			RunStrategy: ptr.To(strategy),
			Template: &v1.VirtualMachineInstanceTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec:       v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{Memory: &v1.Memory{Guest: &mem}}},
			},
		},
	}
}

func (c *cluster) createVM(t *testing.T, vm *v1.VirtualMachine) {
	t.Helper()
	if _, err := c.kv.KubevirtV1().VirtualMachines(vm.Namespace).Create(context.Background(), vm, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create vm %s: %v", vm.Name, err)
	}
}

// TestIntegration runs the controller as a process against a real
// kube-apiserver; the test plays scheduler, kubelet and node agent.
func TestIntegration(t *testing.T) {
	c := startCluster(t)
	addr := testenv.FreeLoopbackAddr(t)
	leader := c.startReplica(t, "a", "--listen="+addr, "--heartbeat-recheck=1s")
	c.waitLeader(t, "a")

	t.Run("RunStrategyAlways", func(t *testing.T) { testAlways(t, c) })
	t.Run("RunStrategyHalted", func(t *testing.T) { testHalted(t, c) })
	t.Run("RunStrategyOnce", func(t *testing.T) { testOnce(t, c) })
	t.Run("RunStrategyRerunOnFailure", func(t *testing.T) { testRerunOnFailure(t, c) })
	t.Run("RunStrategyManual", func(t *testing.T) { testManual(t, c) })
	t.Run("CrashLoopBackOff", func(t *testing.T) { testCrashLoop(t, c) })
	t.Run("ImagePullError", func(t *testing.T) { testImagePullError(t, c) })
	t.Run("PodDeletedBeforeHandoff", func(t *testing.T) { testPodDeletedBeforeHandoff(t, c) })
	t.Run("NodeUnresponsive", func(t *testing.T) { testNodeUnresponsive(t, c) })
	t.Run("HeartbeatStaleOnArrival", func(t *testing.T) { testHeartbeatStaleOnArrival(t, c) })
	t.Run("Metrics", func(t *testing.T) { testMetrics(t, addr) })
	t.Run("WritesPerStateChange", func(t *testing.T) { testWritesPerStateChange(t, c, addr) })
	t.Run("NodeAPISigner", func(t *testing.T) { testSigner(t, c) })
	t.Run("LeaderFailover", func(t *testing.T) { testFailover(t, c, leader) })
	t.Run("BadConfigGivesUpLease", func(t *testing.T) { testBadConfig(t, c) })
}

// stopLeader stops the leading replica r with SIGTERM. A clean stop
// releases the lease at once, but only after r's controllers stopped: a
// successor must never work alongside a predecessor finishing a sync.
func (c *cluster) stopLeader(t *testing.T, r *replica) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := c.kube.CoordinationV1().Leases("nodevirt").Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=nodevirt-controller"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	held := false
	for ev := range w.ResultChan() {
		l, ok := ev.Object.(*coordinationv1.Lease)
		if !ok {
			continue
		}
		if ptr.Deref(l.Spec.HolderIdentity, "") == r.id {
			if !held {
				held = true
				r.signal(syscall.SIGTERM)
			}
			continue
		}
		if !held {
			t.Fatalf("%s does not hold the lease (holder %q)", r.id, ptr.Deref(l.Spec.HolderIdentity, ""))
		}
		log, _ := os.ReadFile(r.logPath)
		if !strings.Contains(string(log), "controllers stopped; releasing the lease") {
			t.Errorf("the lease went from %s before its controllers stopped:\n%s", r.id, log)
		}
		break
	}
	if ctx.Err() != nil {
		t.Fatalf("%s did not release the lease", r.id)
	}
	<-r.exited
}

func (c *cluster) leaseHolder() string {
	l, err := c.kube.CoordinationV1().Leases("nodevirt").Get(context.Background(), "nodevirt-controller", metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

func (c *cluster) waitLeader(t *testing.T, id string) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, "leader "+id, func() (bool, error) { return c.leaseHolder() == id, nil })
}

func testAlways(t *testing.T, c *cluster) {
	ns := c.namespace(t, "always")
	vm := newVM(ns, "vm", v1.RunStrategyAlways)
	c.createVM(t, vm)
	vmi := c.waitVMI(t, ns, "vm", "")
	if got := metav1.GetControllerOf(vmi); got == nil || got.Kind != "VirtualMachine" || got.Name != "vm" {
		t.Fatalf("vmi controller ref = %+v, want the VM", got)
	}
	if vmi.Labels["app"] != "vm" {
		t.Errorf("vmi labels = %v, want the template's", vmi.Labels)
	}
	c.waitPrintable(t, ns, "vm", v1.VirtualMachineStatusStarting)
	c.schedule(t, vmi, "node1")
	c.agentPhase(t, ns, "vm", v1.Running)
	got := c.waitPrintable(t, ns, "vm", v1.VirtualMachineStatusRunning)
	testenv.Eventually(t, 10*time.Second, "vm ready", func() (bool, error) {
		v, err := c.getVM(ns, "vm")
		return err == nil && v.Status.Ready && v.Status.Created, err
	})
	if !hasString(got.Finalizers, v1.VirtualMachineControllerFinalizer) {
		t.Errorf("vm finalizers = %v", got.Finalizers)
	}

	// A guest shutdown: Always deletes the VMI and creates a new one.
	c.agentPhase(t, ns, "vm", v1.Succeeded)
	c.agentRelease(t, ns, "vm", string(vmi.UID))
	second := c.waitVMI(t, ns, "vm", string(vmi.UID))

	// Deleting the VMI of an Always VM yields a new VMI.
	if err := c.kv.KubevirtV1().VirtualMachineInstances(ns).Delete(context.Background(), "vm", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// Never Scheduled: the controller removes the finalizer itself.
	c.waitVMI(t, ns, "vm", string(second.UID))

	// Always → Halted: the VMI is deleted (the agent would power it off).
	patchStrategy(t, c, ns, "vm", v1.RunStrategyHalted)
	testenv.Eventually(t, 30*time.Second, "vmi gone after Halted", func() (bool, error) {
		_, err := c.getVMI(ns, "vm")
		return apierrors.IsNotFound(err), err
	})
	c.waitPrintable(t, ns, "vm", v1.VirtualMachineStatusStopped)

	// Deleting the VM: the finalizer goes once no VMI is left.
	if err := c.kv.KubevirtV1().VirtualMachines(ns).Delete(context.Background(), "vm", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "vm gone", func() (bool, error) {
		_, err := c.getVM(ns, "vm")
		return apierrors.IsNotFound(err), err
	})
}

func patchStrategy(t *testing.T, c *cluster, ns, name string, s v1.VirtualMachineRunStrategy) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, "patch runStrategy", func() (bool, error) {
		vm, err := c.getVM(ns, name)
		if err != nil {
			return false, err
		}
		vm.Spec.RunStrategy = ptr.To(s)
		_, err = c.kv.KubevirtV1().VirtualMachines(ns).Update(context.Background(), vm, metav1.UpdateOptions{})
		return err == nil, err
	})
}

func testHalted(t *testing.T, c *cluster) {
	ns := c.namespace(t, "halted")
	c.createVM(t, newVM(ns, "vm", v1.RunStrategyHalted))
	c.waitPrintable(t, ns, "vm", v1.VirtualMachineStatusStopped)
	if _, err := c.getVMI(ns, "vm"); !apierrors.IsNotFound(err) {
		t.Fatalf("Halted VM has a VMI (err %v)", err)
	}
	// Halted → Always starts a VMI.
	patchStrategy(t, c, ns, "vm", v1.RunStrategyAlways)
	c.waitVMI(t, ns, "vm", "")
}

func testOnce(t *testing.T, c *cluster) {
	ns := c.namespace(t, "once")
	c.createVM(t, newVM(ns, "vm", v1.RunStrategyOnce))
	vmi := c.waitVMI(t, ns, "vm", "")
	c.schedule(t, vmi, "node1")
	c.agentPhase(t, ns, "vm", v1.Running)
	c.agentPhase(t, ns, "vm", v1.Succeeded)
	c.waitPrintable(t, ns, "vm", v1.VirtualMachineStatusStopped)
	assertSameVMIFor(t, c, ns, "vm", string(vmi.UID), 3*time.Second)
}

// assertSameVMIFor checks that the VMI stays the same, undeleted, for d.
func assertSameVMIFor(t *testing.T, c *cluster, ns, name, uid string, d time.Duration) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		v, err := c.getVMI(ns, name)
		if err != nil || string(v.UID) != uid || v.DeletionTimestamp != nil {
			t.Fatalf("vmi %s changed: err=%v", name, err)
		}
	}
}

func assertNoVMIFor(t *testing.T, c *cluster, ns, name string, d time.Duration) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if v, err := c.getVMI(ns, name); !apierrors.IsNotFound(err) {
			t.Fatalf("vmi %s exists (uid %v, err %v)", name, v.UID, err)
		}
	}
}

func testRerunOnFailure(t *testing.T, c *cluster) {
	ns := c.namespace(t, "rerun")
	c.createVM(t, newVM(ns, "vm", v1.RunStrategyRerunOnFailure))
	vmi := c.waitVMI(t, ns, "vm", "")
	c.schedule(t, vmi, "node1")
	c.agentPhase(t, ns, "vm", v1.Running)
	// A crash is restarted (after the first backoff step, 10–15 s).
	c.agentPhase(t, ns, "vm", v1.Failed)
	c.agentRelease(t, ns, "vm", string(vmi.UID))
	c.waitPrintable(t, ns, "vm", v1.VirtualMachineStatusCrashLoopBackOff)
	second := c.waitVMI(t, ns, "vm", string(vmi.UID))
	// A guest shutdown is not: as KubeVirt, the finished VMI is deleted and
	// the VM stays stopped.
	c.schedule(t, second, "node1")
	c.agentPhase(t, ns, "vm", v1.Running)
	c.agentPhase(t, ns, "vm", v1.Succeeded)
	c.agentRelease(t, ns, "vm", string(second.UID))
	c.waitPrintable(t, ns, "vm", v1.VirtualMachineStatusStopped)
	assertNoVMIFor(t, c, ns, "vm", 3*time.Second)
}

func testManual(t *testing.T, c *cluster) {
	ns := c.namespace(t, "manual")
	c.createVM(t, newVM(ns, "vm", v1.RunStrategyManual))
	c.waitPrintable(t, ns, "vm", v1.VirtualMachineStatusStopped)
	if _, err := c.getVMI(ns, "vm"); !apierrors.IsNotFound(err) {
		t.Fatalf("Manual VM started on its own (err %v)", err)
	}
	request(t, c, ns, "vm", v1.VirtualMachineStateChangeRequest{Action: v1.StartRequest})
	vmi := c.waitVMI(t, ns, "vm", "")
	c.schedule(t, vmi, "node1")
	c.agentPhase(t, ns, "vm", v1.Running)
	// A guest shutdown is not restarted.
	c.agentPhase(t, ns, "vm", v1.Succeeded)
	assertSameVMIFor(t, c, ns, "vm", string(vmi.UID), 2*time.Second)
	// Restart = Stop(uid) + Start: a new VMI.
	uid := vmi.UID
	request(t, c, ns, "vm", v1.VirtualMachineStateChangeRequest{Action: v1.StopRequest, UID: &uid},
		v1.VirtualMachineStateChangeRequest{Action: v1.StartRequest})
	c.agentRelease(t, ns, "vm", string(uid))
	next := c.waitVMI(t, ns, "vm", string(uid))
	// Stop (naming the VMI, as virt-api does): the VMI goes and stays gone.
	request(t, c, ns, "vm", v1.VirtualMachineStateChangeRequest{Action: v1.StopRequest, UID: &next.UID})
	c.agentRelease(t, ns, "vm", string(next.UID))
	testenv.Eventually(t, 30*time.Second, "requests consumed", func() (bool, error) {
		v, err := c.getVM(ns, "vm")
		return err == nil && len(v.Status.StateChangeRequests) == 0 && v.Status.PrintableStatus == v1.VirtualMachineStatusStopped, err
	})
	if _, err := c.getVMI(ns, "vm"); !apierrors.IsNotFound(err) {
		t.Fatalf("vmi still exists after Stop (err %v)", err)
	}
}

// request plays nodevirt-api's start/stop/restart: it appends state change
// requests to the VM status.
func request(t *testing.T, c *cluster, ns, name string, reqs ...v1.VirtualMachineStateChangeRequest) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, "state change request", func() (bool, error) {
		vm, err := c.getVM(ns, name)
		if err != nil {
			return false, err
		}
		vm.Status.StateChangeRequests = append(vm.Status.StateChangeRequests, reqs...)
		_, err = c.kv.KubevirtV1().VirtualMachines(ns).UpdateStatus(context.Background(), vm, metav1.UpdateOptions{})
		return err == nil, err
	})
}

func testCrashLoop(t *testing.T, c *cluster) {
	ns := c.namespace(t, "crashloop")
	c.createVM(t, newVM(ns, "vm", v1.RunStrategyAlways))
	uid := ""
	for i := 1; i <= 2; i++ {
		vmi := c.waitVMI(t, ns, "vm", uid)
		uid = string(vmi.UID)
		c.schedule(t, vmi, "node1")
		c.agentPhase(t, ns, "vm", v1.Running)
		failedAt := time.Now()
		c.agentPhase(t, ns, "vm", v1.Failed)
		vm := c.waitPrintable(t, ns, "vm", v1.VirtualMachineStatusCrashLoopBackOff)
		sf := vm.Status.StartFailure
		if sf == nil || sf.ConsecutiveFailCount != i || sf.RetryAfterTimestamp == nil {
			t.Fatalf("failure %d: startFailure = %+v", i, sf)
		}
		base := time.Duration(i*i) * 10 * time.Second
		wait := sf.RetryAfterTimestamp.Sub(failedAt)
		if wait < base-2*time.Second || wait > base*3/2+2*time.Second {
			t.Fatalf("failure %d: retry after %s, want %s … %s", i, wait, base, base*3/2)
		}
		t.Logf("failure %d: backoff %s (base %s)", i, wait.Round(100*time.Millisecond), base)
		c.agentRelease(t, ns, "vm", uid)
		if i == 2 {
			break // the second step waits 40–60 s; its timestamp is checked above
		}
		next := c.waitVMI(t, ns, "vm", uid)
		if got := time.Since(failedAt); got < base-time.Second {
			t.Fatalf("failure %d: new VMI after %s, before the backoff of %s", i, got, base)
		}
		t.Logf("failure %d: new VMI %s after %s", i, next.UID, time.Since(failedAt).Round(100*time.Millisecond))
	}
}

func testFailover(t *testing.T, c *cluster, a *replica) {
	b := c.startReplica(t, "b")
	// b stays a follower while a leads.
	if h := c.leaseHolder(); h != "a" {
		t.Fatalf("lease holder = %q, want a", h)
	}
	lease, err := c.kube.CoordinationV1().Leases("nodevirt").Get(context.Background(), "nodevirt-controller", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	leaseDuration := time.Duration(ptr.Deref(lease.Spec.LeaseDurationSeconds, 0)) * time.Second
	a.signal(syscall.SIGKILL)
	<-a.exited
	killed := time.Now()
	testenv.Eventually(t, 3*leaseDuration, "b leads", func() (bool, error) { return c.leaseHolder() == "b", nil })
	took := time.Since(killed)
	t.Logf("failover after SIGKILL of the leader: %s (lease duration %s)", took.Round(100*time.Millisecond), leaseDuration)
	// client-go measures lease expiry from when the follower observed the
	// last renewal and retries every retryPeriod (×1.2 jitter): failover
	// takes lease duration + at most ~2 retry periods (1 s here).
	if limit := leaseDuration + 2500*time.Millisecond; took > limit {
		t.Errorf("failover took %s, want ≤ %s (lease duration %s + 2.5 retry periods)", took, limit, leaseDuration)
	}
	// The new leader works.
	ns := c.namespace(t, "failover")
	c.createVM(t, newVM(ns, "vm", v1.RunStrategyAlways))
	c.waitVMI(t, ns, "vm", "")
	// A clean stop hands the lease over at once, after the work stopped.
	c.stopLeader(t, b)
}

// testBadConfig: a leader that cannot use its ConfigMap must not sit on the
// lease doing nothing; it releases the lease and exits with an error.
func testBadConfig(t *testing.T, c *cluster) {
	ctx := context.Background()
	cm, err := c.kube.CoreV1().ConfigMaps("nodevirt").Get(ctx, "nodevirt-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["useEmulation"] = "not-a-bool"
	if _, err := c.kube.CoreV1().ConfigMaps("nodevirt").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	bad := c.startReplica(t, "bad")
	select {
	case <-bad.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("a leader with an invalid ConfigMap kept running")
	}
	if code := bad.cmd.ProcessState.ExitCode(); code == 0 {
		t.Errorf("exit code 0, want an error")
	}
	if log, _ := os.ReadFile(bad.logPath); !strings.Contains(string(log), "useEmulation") {
		t.Errorf("the failed leader's log does not name the bad key:\n%s", log)
	}
	if h := c.leaseHolder(); h == "bad" {
		t.Errorf("lease still held by the failed leader")
	}
}

func hasString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
