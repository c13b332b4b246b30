package acceptance

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/hack/testenv"
)

// poll is the interval of the few loops testenv.Eventually cannot express
// (an observation window, a wait whose timeout is not fatal); every wait
// for a condition goes through testenv.Eventually.
const poll = 250 * time.Millisecond

// kubectl runs kubectl with stdin (may be nil) and fails the test on error.
func (s *suite) kubectl(t *testing.T, stdin []byte, args ...string) string {
	t.Helper()
	out, err := s.kubectlErr(stdin, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// kubectlErr runs kubectl with stdin (may be nil).
func (s *suite) kubectlErr(stdin []byte, args ...string) (string, error) {
	return s.cluster.KubectlText(2*time.Minute, stdin, args...)
}

// apply applies manifest in the suite's namespace.
func (s *suite) apply(t *testing.T, manifest []byte) {
	t.Helper()
	s.kubectl(t, manifest, "apply", "-n", namespace, "-f", "-")
}

// example reads deploy/examples/name, renaming its object to newName (when
// not empty) and applying edits (old → new string replacements).
func (s *suite) example(t *testing.T, name, newName string, edits ...string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(s.root, "deploy", "examples", name))
	if err != nil {
		t.Fatal(err)
	}
	m := string(b)
	if newName != "" {
		m = renameObject(m, newName)
	}
	return edit(t, []byte(m), edits...)
}

// edit applies old → new replacements (every occurrence) to manifest m;
// each old must occur.
func edit(t *testing.T, m []byte, pairs ...string) []byte {
	t.Helper()
	s := string(m)
	for i := 0; i+1 < len(pairs); i += 2 {
		if !strings.Contains(s, pairs[i]) {
			t.Fatalf("edit target %q not in manifest:\n%s", pairs[i], s)
		}
		s = strings.ReplaceAll(s, pairs[i], pairs[i+1])
	}
	return []byte(s)
}

// renameObject sets the first metadata name of manifest m.
func renameObject(m, name string) string {
	lines := strings.Split(m, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "  name: ") {
			lines[i] = "  name: " + name
			break
		}
	}
	return strings.Join(lines, "\n")
}

// waitVMI polls VMI name until cond holds and returns it.
func (s *suite) waitVMI(t *testing.T, name string, timeout time.Duration, what string, cond func(*v1.VirtualMachineInstance) bool) *v1.VirtualMachineInstance {
	t.Helper()
	var last, got *v1.VirtualMachineInstance
	testenv.Eventually(t, timeout, fmt.Sprintf("VMI %s %s", name, what), func() error {
		vmi, err := s.virt.KubevirtV1().VirtualMachineInstances(namespace).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get VMI %s: %w (last status %s)", name, err, statusLine(last))
		}
		last = vmi
		if !cond(vmi) {
			return fmt.Errorf("VMI %s not %s: last status %s", name, what, statusLine(vmi))
		}
		got = vmi
		return nil
	})
	return got
}

// waitNewVMI waits for VMI name to exist with a UID other than old.
func (s *suite) waitNewVMI(t *testing.T, name, old string, timeout time.Duration) *v1.VirtualMachineInstance {
	t.Helper()
	return s.waitVMI(t, name, timeout, "recreated", func(vmi *v1.VirtualMachineInstance) bool {
		return string(vmi.UID) != old && vmi.DeletionTimestamp == nil
	})
}

// waitVMIGone waits until VMI name does not exist or, with uid not empty,
// has a UID other than uid.
func (s *suite) waitVMIGone(t *testing.T, name, uid string, timeout time.Duration) {
	t.Helper()
	what := fmt.Sprintf("VMI %s gone", name)
	if uid != "" {
		what = fmt.Sprintf("VMI %s (uid %s) gone or replaced", name, uid)
	}
	testenv.Eventually(t, timeout, what, func() error {
		vmi, err := s.virt.KubevirtV1().VirtualMachineInstances(namespace).Get(context.Background(), name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return fmt.Errorf("get VMI %s: %w", name, err)
		case uid != "" && string(vmi.UID) != uid:
			return nil
		}
		return fmt.Errorf("VMI %s still there: %s", name, statusLine(vmi))
	})
}

// waitVM polls VM name until cond holds and returns it.
func (s *suite) waitVM(t *testing.T, name string, timeout time.Duration, what string, cond func(*v1.VirtualMachine) bool) *v1.VirtualMachine {
	t.Helper()
	var last, got *v1.VirtualMachine
	testenv.Eventually(t, timeout, fmt.Sprintf("VM %s %s", name, what), func() error {
		vm, err := s.virt.KubevirtV1().VirtualMachines(namespace).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get VM %s: %w (last status %s)", name, err, vmStatusLine(last))
		}
		last = vm
		if !cond(vm) {
			return fmt.Errorf("VM %s not %s: last status %s", name, what, vmStatusLine(vm))
		}
		got = vm
		return nil
	})
	return got
}

func vmStatusLine(vm *v1.VirtualMachine) string {
	if vm == nil {
		return "<none>"
	}
	return fmt.Sprintf("printableStatus=%s ready=%t startFailure=%+v", vm.Status.PrintableStatus, vm.Status.Ready, vm.Status.StartFailure)
}

func phaseIs(p v1.VirtualMachineInstancePhase) func(*v1.VirtualMachineInstance) bool {
	return func(vmi *v1.VirtualMachineInstance) bool { return vmi.Status.Phase == p }
}

func isFinal(vmi *v1.VirtualMachineInstance) bool { return vmi.Status.Phase.IsFinal() }

// condition returns the status of condition ct ("" when absent).
func condition(vmi *v1.VirtualMachineInstance, ct v1.VirtualMachineInstanceConditionType) corev1.ConditionStatus {
	for _, c := range vmi.Status.Conditions {
		if c.Type == ct {
			return c.Status
		}
	}
	return ""
}

func statusLine(vmi *v1.VirtualMachineInstance) string {
	if vmi == nil {
		return "<none>"
	}
	var conds []string
	for _, c := range vmi.Status.Conditions {
		conds = append(conds, fmt.Sprintf("%s=%s", c.Type, c.Status))
	}
	return fmt.Sprintf("uid=%s phase=%s reason=%q node=%s conditions=%v deleting=%t", vmi.UID, vmi.Status.Phase, vmi.Status.Reason,
		vmi.Status.NodeName, conds, vmi.DeletionTimestamp != nil)
}

// launcherPods returns the launcher pods of the VMI with uid.
func (s *suite) launcherPods(t *testing.T, uid string) []corev1.Pod {
	t.Helper()
	pods, err := s.kube.CoreV1().Pods(namespace).List(context.Background(), metav1.ListOptions{
		LabelSelector: "kubevirt.io=virt-launcher,kubevirt.io/created-by=" + uid,
	})
	if err != nil {
		t.Fatal(err)
	}
	return pods.Items
}

// launcherPod returns the one launcher pod of vmi.
func (s *suite) launcherPod(t *testing.T, vmi *v1.VirtualMachineInstance) corev1.Pod {
	t.Helper()
	pods := s.launcherPods(t, string(vmi.UID))
	if len(pods) != 1 {
		t.Fatalf("VMI %s: %d launcher pods, want 1", vmi.Name, len(pods))
	}
	return pods[0]
}

// waitPodsGone waits until the VMI with uid has no launcher pod left.
func (s *suite) waitPodsGone(t *testing.T, uid string, timeout time.Duration) {
	t.Helper()
	testenv.Eventually(t, timeout, fmt.Sprintf("launcher pods of VMI %s gone", uid), func() error {
		pods := s.launcherPods(t, uid)
		if len(pods) == 0 {
			return nil
		}
		var names []string
		for _, p := range pods {
			names = append(names, fmt.Sprintf("%s (phase %s, deleting %t)", p.Name, p.Status.Phase, p.DeletionTimestamp != nil))
		}
		return fmt.Errorf("launcher pods still there: %s", strings.Join(names, ", "))
	})
}

// podDir is the pod's directory on the host (its node's kubelet root).
func (s *suite) podDir(t *testing.T, pod corev1.Pod) string {
	t.Helper()
	for _, n := range s.cluster.Nodes {
		if n.Name == pod.Spec.NodeName {
			return filepath.Join(n.KubeletRoot, "pods", string(pod.UID))
		}
	}
	t.Fatalf("pod %s: node %q is not a cluster node", pod.Name, pod.Spec.NodeName)
	return ""
}

// serialLog is the guest's serial console log of the VMI's pod.
func (s *suite) serialLog(t *testing.T, pod corev1.Pod) string {
	t.Helper()
	return filepath.Join(s.podDir(t, pod), "volumes", "kubernetes.io~empty-dir", "sockets", "serial.log")
}

// waitSerial waits for a line of the pod's serial log that starts with
// prefix and returns it.
func (s *suite) waitSerial(t *testing.T, pod corev1.Pod, prefix string, timeout time.Duration) string {
	t.Helper()
	path := s.serialLog(t, pod)
	var line string
	testenv.Eventually(t, timeout, fmt.Sprintf("a line starting with %q in serial log %s", prefix, path), func() error {
		b, err := os.ReadFile(path)
		for _, l := range strings.Split(string(b), "\n") {
			if l = strings.TrimRight(l, "\r"); strings.HasPrefix(l, prefix) {
				line = l
				return nil
			}
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("no line starting with %q yet; log:\n%s", prefix, tail(string(b), 40))
	})
	return line
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// qemuPid finds the QEMU process of VMI name (QEMU runs with
// -name guest=<namespace>_<name>,...); 0 when there is none.
func qemuPid(name string) int {
	entries, _ := os.ReadDir("/proc")
	want := "guest=" + namespace + "_" + name + ","
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if len(args) == 0 || !strings.Contains(filepath.Base(args[0]), "qemu-system") {
			continue
		}
		for _, a := range args {
			if strings.HasPrefix(a, want) {
				return pid
			}
		}
	}
	return 0
}

// waitQEMU waits until VMI name has a QEMU process and returns its pid.
func waitQEMU(t *testing.T, name string, timeout time.Duration) int {
	t.Helper()
	var pid int
	testenv.Eventually(t, timeout, fmt.Sprintf("a QEMU process for VMI %s", name), func() bool {
		pid = qemuPid(name)
		return pid != 0
	})
	return pid
}

// waitEvent waits for an event of type typ and reason on object uid.
func (s *suite) waitEvent(t *testing.T, uid, typ, reason string, timeout time.Duration) {
	t.Helper()
	s.waitEventWhere(t, uid, fmt.Sprintf("a %s event %q", typ, reason), timeout, func(e corev1.Event) bool {
		return e.Type == typ && e.Reason == reason
	})
}

// waitEventWhere waits for an event on object uid that match accepts and
// returns it.
func (s *suite) waitEventWhere(t *testing.T, uid, what string, timeout time.Duration, match func(corev1.Event) bool) corev1.Event {
	t.Helper()
	var found corev1.Event
	testenv.Eventually(t, timeout, fmt.Sprintf("%s on %s", what, uid), func() error {
		evs, err := s.kube.CoreV1().Events(namespace).List(context.Background(), metav1.ListOptions{
			FieldSelector: "involvedObject.uid=" + uid,
		})
		if err != nil {
			return fmt.Errorf("list events: %w", err)
		}
		var got []string
		for _, e := range evs.Items {
			if match(e) {
				found = e
				return nil
			}
			got = append(got, e.Type+"/"+e.Reason+": "+e.Message)
		}
		return fmt.Errorf("none yet (events: %q)", got)
	})
	return found
}

// deleteVM deletes VM name and waits until its VMI is gone.
func (s *suite) deleteVM(t *testing.T, name string) {
	t.Helper()
	s.kubectl(t, nil, "delete", "-n", namespace, "vm", name, "--ignore-not-found", "--wait=true", "--timeout=120s")
	s.waitVMIGone(t, name, "", 2*time.Minute)
}

// deleteVMI deletes VMI name and waits until it is gone.
func (s *suite) deleteVMI(t *testing.T, name string) {
	t.Helper()
	s.kubectl(t, nil, "delete", "-n", namespace, "vmi", name, "--ignore-not-found", "--wait=true", "--timeout=120s")
}

// dump logs the state needed to debug a failed scenario.
func (s *suite) dump(t *testing.T) {
	t.Helper()
	for _, args := range [][]string{
		{"get", "-n", namespace, "vm,vmi,pods", "-o", "wide"},
		{"get", "-n", namespace, "vmi", "-o", "yaml"},
		{"get", "-n", namespace, "events", "--sort-by=.lastTimestamp"},
		{"get", "nodes", "-o", "wide", "--show-labels"},
		{"get", "-n", "nodevirt", "pods", "-o", "wide"},
		{"logs", "-n", "nodevirt", "deployment/nodevirt-controller", "--tail=150"},
		{"logs", "-n", "nodevirt", "daemonset/nodevirt-agent", "--tail=200"},
	} {
		out, err := s.kubectlErr(nil, args...)
		t.Logf("--- kubectl %s (err %v)\n%s", strings.Join(args, " "), err, out)
	}
	pods, err := s.kube.CoreV1().Pods(namespace).List(context.Background(), metav1.ListOptions{LabelSelector: "kubevirt.io=virt-launcher"})
	if err != nil {
		return
	}
	for _, p := range pods.Items {
		b, err := os.ReadFile(s.serialLog(t, p))
		t.Logf("--- serial log of %s (err %v)\n%s", p.Name, err, tail(string(b), 60))
	}
}
