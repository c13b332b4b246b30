package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/e2e/localcluster"
	"github.com/nodevirt/nodevirt/hack/testenv"
	"github.com/nodevirt/nodevirt/node/storeguard"
)

// Process names (comm, 15 characters at most) of what the faults kill.
const (
	agentComm      = "nodevirt-agent"
	launcherComm   = "nodevirt-launch"
	controllerComm = "nodevirt-contro"
)

// recoveryTimeout bounds every fault's recovery; a slower one fails the
// run (the harness cannot go on meaningfully). The victim's successor may
// wait out the VM's crash-loop backoff (up to 300 s plus jitter) first.
const (
	recoveryTimeout = 4 * time.Minute
	victimTimeout   = 9 * time.Minute
)

// inject injects f and waits until what it hit serves again.
func (h *harness) inject(t *testing.T, f Fault) Outcome {
	t.Helper()
	o := Outcome{Fault: f, At: time.Since(h.start)}
	began := time.Now()
	switch f.Kind {
	case AgentKill:
		o.Target, o.Respawn = h.killAgent(t)
	case LauncherKill, QEMUKill:
		o.Target, o.Detail = h.killVictim(t, f.Kind)
	case ControllerKill:
		o.Target = h.killLeader(t)
	case KubeletRestart:
		o.Target = "kubelet0"
		h.restartDaemon(t, "kubelet0", 0)
	case ContainerdRestart:
		o.Target = "containerd0"
		h.restartDaemon(t, "containerd0", 0)
	case StoreFull:
		o.Target = "the agent's store filesystem"
		var freed time.Time
		o.Detail, freed = h.fillStore(t)
		began = freed // recovery counts from the space coming back
	case APIServerOutage:
		o.Target = "kube-apiserver"
		h.restartDaemon(t, "kube-apiserver", APIServerDown)
		began = began.Add(APIServerDown) // recovery counts from its restart
	default:
		t.Fatalf("fault %d: unknown kind %q", f.Seq, f.Kind)
	}
	o.Recovery = time.Since(began)
	return o
}

// killAgent SIGKILLs the agent's host process and waits until the
// kubelet's restart of its container serves the node API (the new process
// answers on the agent's socket; the old one is dead). It returns the
// target and how long the kubelet took to start the new process.
func (h *harness) killAgent(t *testing.T) (string, time.Duration) {
	t.Helper()
	var pod corev1.Pod
	var pid int
	testenv.Eventually(t, recoveryTimeout, "the agent's process", func() error {
		var err error
		if pod, err = h.agentPod(t.Context()); err != nil {
			return err
		}
		pid, err = localcluster.PodProcess(string(pod.UID), agentComm)
		return err
	})
	killed := time.Now()
	sigkill(t, pod, pid)
	var respawn time.Duration
	testenv.Eventually(t, recoveryTimeout, "the restarted agent serving the node API", func() error {
		p, err := h.agentPod(t.Context())
		if err != nil {
			return err
		}
		if _, err := localcluster.PodProcess(string(p.UID), agentComm); err != nil {
			return err
		}
		if respawn == 0 {
			respawn = time.Since(killed)
		}
		_, err = h.records(t.Context())
		return err
	})
	return fmt.Sprintf("pid %d (pod %s)", pid, pod.Name), respawn
}

// killVictim SIGKILLs the victim VM's launcher or QEMU, waits for its VMI
// to be final and for its successor (runStrategy Always, after the VM's
// crash-loop backoff) to run a booted guest.
func (h *harness) killVictim(t *testing.T, kind Kind) (target, detail string) {
	t.Helper()
	b, err := h.booted(t.Context(), victim, "", victimTimeout)
	if err != nil {
		t.Fatalf("victim before the %s: %v", kind, err)
	}
	pid, what := b.qemu, "QEMU"
	if kind == LauncherKill {
		what = "launcher"
		if pid, err = localcluster.PodProcess(string(b.pod.UID), launcherComm); err != nil {
			t.Fatal(err)
		}
	}
	killed := time.Now()
	sigkill(t, b.pod, pid)
	var phase v1.VirtualMachineInstancePhase
	testenv.Eventually(t, recoveryTimeout, "the victim's VMI final after its "+what+" was killed", func() error {
		vmi, err := h.virt.KubevirtV1().VirtualMachineInstances(namespace).Get(t.Context(), victim, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err) || (err == nil && vmi.UID != b.vmi):
			phase = "gone"
			return nil
		case err != nil:
			return err
		case vmi.Status.Phase.IsFinal():
			phase = vmi.Status.Phase
			return nil
		}
		return fmt.Errorf("VMI %s phase %s", b.vmi, vmi.Status.Phase)
	})
	final := time.Since(killed)
	if _, err := h.booted(t.Context(), victim, b.vmi, victimTimeout); err != nil {
		t.Fatalf("victim after its %s was killed: %v", what, err)
	}
	detail = fmt.Sprintf("VMI %s after %v, its successor's guest booted %v later", phase, final.Round(10*time.Millisecond),
		(time.Since(killed) - final).Round(10*time.Millisecond))
	if vm, err := h.virt.KubevirtV1().VirtualMachines(namespace).Get(t.Context(), victim, metav1.GetOptions{}); err == nil && vm.Status.StartFailure != nil {
		detail += fmt.Sprintf(" (crash-loop backoff: failure %d in a row)", vm.Status.StartFailure.ConsecutiveFailCount)
	}
	return fmt.Sprintf("%s pid %d (VMI %s)", what, pid, b.vmi), detail
}

// killLeader SIGKILLs the controller replica holding the Lease and waits
// for a leader to renew it after the kill.
func (h *harness) killLeader(t *testing.T) string {
	t.Helper()
	leases := h.kube.CoordinationV1().Leases("nodevirt")
	var holder string
	testenv.Eventually(t, recoveryTimeout, "the controller Lease's holder", func() error {
		l, err := leases.Get(t.Context(), "nodevirt-controller", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
			return fmt.Errorf("lease has no holder")
		}
		holder = *l.Spec.HolderIdentity
		return nil
	})
	podName, _, _ := strings.Cut(holder, "_") // identity: <pod>_<pid>
	pod, err := h.kube.CoreV1().Pods("nodevirt").Get(t.Context(), podName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("leader %s: %v", holder, err)
	}
	pid, err := localcluster.PodProcess(string(pod.UID), controllerComm)
	if err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	sigkill(t, *pod, pid)
	testenv.Eventually(t, recoveryTimeout, "a controller leader renewing the Lease after the kill", func() error {
		l, err := leases.Get(t.Context(), "nodevirt-controller", metav1.GetOptions{})
		if err != nil {
			return err
		}
		// The killed process renews nothing: a renewal after the kill is
		// a live leader's, the other replica's or the restarted one's
		// (whose identity <pod>_1 is the same: pid 1 of the container).
		if l.Spec.RenewTime == nil || !l.Spec.RenewTime.After(killed) {
			return fmt.Errorf("lease held by %v, renewed %v", ptrString(l.Spec.HolderIdentity), l.Spec.RenewTime)
		}
		return nil
	})
	return fmt.Sprintf("pid %d (pod %s)", pid, pod.Name)
}

// sigkill sends SIGKILL to host pid of pod and waits until it is gone.
func sigkill(t *testing.T, pod corev1.Pod, pid int) {
	t.Helper()
	if err := localcluster.SIGKILL(string(pod.UID), pid, 30*time.Second); err != nil {
		t.Fatal(err)
	}
}

// agentPod is the agent pod on the run's node.
func (h *harness) agentPod(ctx context.Context) (corev1.Pod, error) {
	return localcluster.FindAgentPod(ctx, h.kube, h.node.Name)
}

func ptrString(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// fillStore fills the filesystem of the agent's store (a tmpfs of its own
// on the local cluster, hack/cluster/host.sh) to 1 MiB below its free
// space, checks that the node stops taking new VMIs (NodevirtStoreFull
// True, schedulable=false), holds it StoreFullHold while the workload and
// the residents go on, frees it and waits for the node to take VMIs again.
// It returns what it saw and when the space came back.
func (h *harness) fillStore(t *testing.T) (string, time.Time) {
	t.Helper()
	dir := filepath.Join(h.node.Dir, "nodevirt")
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	free := int64(st.Bavail) * st.Bsize
	if st.Blocks*uint64(st.Bsize) > 1<<30 {
		t.Fatalf("%s is not the agent's own small filesystem (%d bytes): restart the local cluster (make cluster-down) so hack/cluster/host.sh mounts it", dir, st.Blocks*uint64(st.Bsize))
	}
	filler := filepath.Join(dir, "chaos-filler")
	h.storeFull.Store(true)
	filled := time.Now()
	if err := os.WriteFile(filler, make([]byte, free-1<<20), 0o600); err != nil {
		t.Fatalf("fill %s: %v", dir, err)
	}
	t.Cleanup(func() { _ = os.Remove(filler) })
	refused := testenv.Eventually(t, time.Minute, "the node refusing new VMIs (NodevirtStoreFull True, schedulable=false)", func() error {
		return h.nodeTakesVMIs(t.Context(), false)
	})
	time.Sleep(StoreFullHold)
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	freed := time.Now()
	testenv.Eventually(t, time.Minute, "the node taking VMIs again", func() error { return h.nodeTakesVMIs(t.Context(), true) })
	h.storeFull.Store(false)
	return fmt.Sprintf("filled to 1 MiB free (of %d MiB free) at %v: the node refused new VMIs %v later; freed after %v",
		free>>20, filled.Sub(h.start).Round(time.Second), refused.Round(10*time.Millisecond), StoreFullHold), freed
}

// nodeTakesVMIs reports nil when the node's schedulable label and
// NodevirtStoreFull condition say it takes new VMIs (want true) or
// refuses them (want false).
func (h *harness) nodeTakesVMIs(ctx context.Context, want bool) error {
	n, err := h.kube.CoreV1().Nodes().Get(ctx, h.node.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	return takesVMIs(n, want)
}

// takesVMIs is nodeTakesVMIs for a node at hand.
func takesVMIs(n *corev1.Node, want bool) error {
	full := storeguard.NodeCondition(n) == corev1.ConditionTrue
	if sched := n.Labels[v1.SchedulableLabel] == "true"; sched != want || full == want {
		return fmt.Errorf("node %s: %s=%q, %s %q", n.Name, v1.SchedulableLabel, n.Labels[v1.SchedulableLabel],
			storeguard.ConditionType, storeguard.NodeCondition(n))
	}
	return nil
}
