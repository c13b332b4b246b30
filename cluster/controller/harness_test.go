package controller_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/cluster/certsigner"
	"github.com/nodevirt/nodevirt/cluster/client/clientset/versioned"
	"github.com/nodevirt/nodevirt/hack/testenv"
	"github.com/nodevirt/nodevirt/hack/testenv/apiserver"
)

// cluster is a real API server plus clients, shared by the subtests of one
// integration test. The test plays kubelet, scheduler and node agent.
type cluster struct {
	env  *apiserver.Env
	kube kubernetes.Interface
	kv   versioned.Interface
	bin  string
	// kubeconfig makes the controller act as its ServiceAccount, with the
	// RBAC of deploy/controller.
	kubeconfig string
	// caDir is the node API CA (the mounted Secret nodevirt-ca).
	caDir string
}

func startCluster(t testing.TB) *cluster {
	t.Helper()
	env := apiserver.Start(t)
	c := &cluster{env: env, kube: kubernetes.NewForConfigOrDie(env.Config), kv: versioned.NewForConfigOrDie(env.Config)}
	c.bin = buildController(t)
	c.namespace(t, "nodevirt")
	c.applyControllerRBAC(t)
	c.kubeconfig = c.impersonatingKubeconfig(t)
	c.caDir = writeCA(t)
	return c
}

// writeCA writes a fresh node API CA (ca.crt, ca.key) into a directory.
func writeCA(t testing.TB) string {
	t.Helper()
	cert, key, err := certsigner.NewCA("nodevirt-test-ca", 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, b := range map[string][]byte{certsigner.CACertKey: cert, certsigner.CAKeyKey: key} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// buildController builds cmd/nodevirt-controller into t.TempDir(), or
// returns $NODEVIRT_CONTROLLER_BIN when set (e.g. a -race build).
func buildController(t testing.TB) string {
	t.Helper()
	if bin := os.Getenv("NODEVIRT_CONTROLLER_BIN"); bin != "" {
		return bin
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "nodevirt-controller")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/nodevirt-controller")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build nodevirt-controller: %v\n%s", err, out)
	}
	return bin
}

func (c *cluster) namespace(t testing.TB, name string) string {
	t.Helper()
	_, err := c.kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	return name
}

// replica is one controller process.
type replica struct {
	id      string
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{}
}

// fastLease are leader election timings short enough for tests.
var fastLease = []string{"--lease-duration=6s", "--renew-deadline=4s", "--retry-period=1s"}

// startReplica runs the controller as a process with the env's kubeconfig;
// it is stopped (by pid) in t.Cleanup.
func (c *cluster) startReplica(t testing.TB, id string, extra ...string) *replica {
	t.Helper()
	r := &replica{id: id, logPath: filepath.Join(t.TempDir(), id+".log"), exited: make(chan struct{})}
	logFile, err := os.Create(r.logPath)
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--kubeconfig=" + c.kubeconfig, "--identity=" + id, "--listen=",
		"--use-emulation", "--launcher-image=nodevirt.local/nodevirt-launcher:dev", "--workers=2", "--ca-dir=" + c.caDir}, fastLease...)
	r.cmd = exec.Command(c.bin, append(args, extra...)...)
	r.cmd.Stdout, r.cmd.Stderr = logFile, logFile
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := r.cmd.Start(); err != nil {
		logFile.Close()
		t.Fatalf("start controller %s: %v", id, err)
	}
	go func() {
		_ = r.cmd.Wait()
		logFile.Close()
		close(r.exited)
	}()
	t.Cleanup(func() {
		r.signal(syscall.SIGTERM)
		select {
		case <-r.exited:
		case <-time.After(10 * time.Second):
			r.signal(syscall.SIGKILL)
			<-r.exited
		}
		data, _ := os.ReadFile(r.logPath)
		if strings.Contains(string(data), "DATA RACE") {
			t.Errorf("controller %s: the race detector fired", id)
		}
		if t.Failed() {
			lines := strings.Split(string(data), "\n")
			t.Logf("controller %s log tail:\n%s", id, strings.Join(lines[max(0, len(lines)-40):], "\n"))
		}
	})
	return r
}

func (r *replica) signal(s syscall.Signal) {
	select {
	case <-r.exited:
	default:
		_ = r.cmd.Process.Signal(s)
	}
}

// launch creates a VMI named name in ns with spec (64Mi of guest memory
// when it sets none) and returns its launcher pod once the controller has
// made it.
func (c *cluster) launch(t testing.TB, ns, name string, spec v1.VirtualMachineInstanceSpec) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	if spec.Domain.Memory == nil {
		mem := resource.MustParse("64Mi")
		spec.Domain.Memory = &v1.Memory{Guest: &mem}
	}
	v, err := c.kv.KubevirtV1().VirtualMachineInstances(ns).Create(ctx, &v1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: spec,
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create vmi %s: %v", name, err)
	}
	var pod *corev1.Pod
	testenv.Eventually(t, 30*time.Second, "launcher pod of "+name, func() (bool, error) {
		pods, err := c.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: v1.CreatedByLabel + "=" + string(v.UID)})
		if err != nil || len(pods.Items) == 0 {
			return false, err
		}
		pod = &pods.Items[0]
		return true, nil
	})
	return pod
}

// --- the test plays the node agent, kubelet and scheduler ---

func (c *cluster) getVMI(ns, name string) (*v1.VirtualMachineInstance, error) {
	return c.kv.KubevirtV1().VirtualMachineInstances(ns).Get(context.Background(), name, metav1.GetOptions{})
}

func (c *cluster) getVM(ns, name string) (*v1.VirtualMachine, error) {
	return c.kv.KubevirtV1().VirtualMachines(ns).Get(context.Background(), name, metav1.GetOptions{})
}

// waitVMI waits for a VMI named name that is not old (a UID) and not being
// deleted, and returns it.
func (c *cluster) waitVMI(t testing.TB, ns, name string, old string) *v1.VirtualMachineInstance {
	t.Helper()
	var vmi *v1.VirtualMachineInstance
	testenv.Eventually(t, 30*time.Second, "vmi "+name, func() (bool, error) {
		v, err := c.getVMI(ns, name)
		if err != nil {
			return false, err
		}
		vmi = v
		return string(v.UID) != old && v.DeletionTimestamp == nil, nil
	})
	return vmi
}

// schedule plays scheduler and kubelet: it binds the VMI's launcher pod to
// node and marks it Running, then waits for the VMI to be Scheduled.
func (c *cluster) schedule(t testing.TB, vmi *v1.VirtualMachineInstance, node string) *v1.VirtualMachineInstance {
	t.Helper()
	ctx := context.Background()
	var pod *corev1.Pod
	testenv.Eventually(t, 30*time.Second, "launcher pod of "+vmi.Name, func() (bool, error) {
		pods, err := c.kube.CoreV1().Pods(vmi.Namespace).List(ctx, metav1.ListOptions{LabelSelector: v1.CreatedByLabel + "=" + string(vmi.UID)})
		if err != nil || len(pods.Items) == 0 {
			return false, err
		}
		pod = &pods.Items[0]
		return true, nil
	})
	err := c.kube.CoreV1().Pods(pod.Namespace).Bind(ctx, &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name},
		Target:     corev1.ObjectReference{Kind: "Node", Name: node},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("bind pod %s: %v", pod.Name, err)
	}
	testenv.Eventually(t, 10*time.Second, "pod running", func() (bool, error) {
		p, err := c.kube.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		p.Status.Phase = corev1.PodRunning
		_, err = c.kube.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		return err == nil, err
	})
	var out *v1.VirtualMachineInstance
	testenv.Eventually(t, 30*time.Second, "vmi "+vmi.Name+" Scheduled", func() (bool, error) {
		v, err := c.getVMI(vmi.Namespace, vmi.Name)
		if err != nil {
			return false, err
		}
		out = v
		return v.Status.Phase == v1.Scheduled && v.Status.NodeName == node && v.Labels[v1.NodeNameLabel] == node, nil
	})
	return out
}

// agentPhase plays the agent writing the VMI phase (and Ready when Running).
func (c *cluster) agentPhase(t testing.TB, ns, name string, phase v1.VirtualMachineInstancePhase) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, fmt.Sprintf("vmi %s → %s", name, phase), func() (bool, error) {
		v, err := c.getVMI(ns, name)
		if err != nil {
			return false, err
		}
		v.Status.Phase = phase
		v.Status.PhaseTransitionTimestamps = append(v.Status.PhaseTransitionTimestamps, v1.VirtualMachineInstancePhaseTransitionTimestamp{
			Phase: phase, PhaseTransitionTimestamp: metav1.Now(),
		})
		ready := corev1.ConditionFalse
		if phase == v1.Running {
			ready = corev1.ConditionTrue
		}
		v.Status.Conditions = []v1.VirtualMachineInstanceCondition{{Type: v1.VirtualMachineInstanceReady, Status: ready}}
		_, err = c.kv.KubevirtV1().VirtualMachineInstances(ns).UpdateStatus(context.Background(), v, metav1.UpdateOptions{})
		return err == nil, err
	})
}

// agentRelease plays the agent finishing a deletion: once the VMI is being
// deleted it removes the VMI finalizer; then waits for the VMI to be gone.
func (c *cluster) agentRelease(t testing.TB, ns, name string, uid string) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, "vmi "+name+" released", func() (bool, error) {
		v, err := c.getVMI(ns, name)
		if apierrors.IsNotFound(err) || (err == nil && string(v.UID) != uid) {
			return true, nil
		}
		if err != nil || v.DeletionTimestamp == nil {
			return false, err
		}
		v.Finalizers = nil
		_, err = c.kv.KubevirtV1().VirtualMachineInstances(ns).Update(context.Background(), v, metav1.UpdateOptions{})
		return false, err
	})
}

func (c *cluster) waitPrintable(t testing.TB, ns, name string, want v1.VirtualMachinePrintableStatus) *v1.VirtualMachine {
	t.Helper()
	var vm *v1.VirtualMachine
	testenv.Eventually(t, 30*time.Second, fmt.Sprintf("vm %s printableStatus %s", name, want), func() (bool, error) {
		v, err := c.getVM(ns, name)
		if err != nil {
			return false, err
		}
		vm = v
		return v.Status.PrintableStatus == want, fmt.Errorf("printableStatus %q", v.Status.PrintableStatus)
	})
	return vm
}
