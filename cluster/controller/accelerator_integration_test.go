package controller_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/cluster/vmi"
	"github.com/nodevirt/nodevirt/hack/testenv"
)

// TestIntegration_Accelerator runs the controller with useEmulation auto
// against a real kube-apiserver holding a mixed cluster: one node whose
// agent found KVM, one whose agent did not. Each launcher pod requests
// /dev/kvm exactly when a KVM node fits its VMI, and an emulated pod is
// kept off KVM nodes; a node's verdict changing is seen by the next VMI.
func TestIntegration_Accelerator(t *testing.T) {
	c := startCluster(t)
	c.startReplica(t, "acc", "--use-emulation=auto")
	c.waitLeader(t, "acc")
	ns := c.namespace(t, "accel")
	ctx := context.Background()

	// node creates a node as its kubelet and agent would leave it: Ready
	// (without the not-ready taint the API server's admission puts on a
	// new node) and labelled with the agent's KVM verdict.
	node := func(name, kvm, zone string) {
		n, err := c.kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			v1.KVMLabel: kvm, v1.SchedulableLabel: "true", "zone": zone, corev1.LabelHostname: name}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create node %s: %v", name, err)
		}
		t.Cleanup(func() { _ = c.kube.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
		n.Spec.Taints = nil
		if _, err := c.kube.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("untaint node %s: %v", name, err)
		}
	}
	node("kvm-node", "true", "a")
	node("tcg-node", "false", "b")
	// The controller's node informer has seen them once a VMI gets KVM.
	seq := 0
	next := func(prefix string) string { seq++; return fmt.Sprintf("%s-%d", prefix, seq) }

	launch := func(name string, selector map[string]string) *corev1.Pod {
		t.Helper()
		return c.launch(t, ns, name, v1.VirtualMachineInstanceSpec{NodeSelector: selector})
	}
	check := func(pod *corev1.Pod, wantKVM bool) {
		t.Helper()
		if got := v1.RequestsKVM(pod); got != wantKVM {
			t.Errorf("pod %s requests devices.kubevirt.io/kvm: %t, want %t", pod.Name, got, wantKVM)
		}
		if got := vmi.KeptOffKVMNodes(pod); got == wantKVM {
			t.Errorf("pod %s kept off KVM nodes: %t, want %t", pod.Name, got, !wantKVM)
		}
	}

	testenv.Eventually(t, 10*time.Second, "the controller sees the KVM node", func() (bool, error) {
		return v1.RequestsKVM(launch(next("warmup"), nil)), nil
	})
	check(launch("anywhere", nil), true)
	check(launch("zone-b", map[string]string{"zone": "b"}), false)
	check(launch("zone-a", map[string]string{"zone": "a"}), true)

	// The KVM node is cordoned: nothing with KVM fits any more.
	cordon := func(on bool) {
		t.Helper()
		n, err := c.kube.CoreV1().Nodes().Get(ctx, "kvm-node", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Spec.Unschedulable = on
		if _, err := c.kube.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cordon(true)
	// The controller's node informer sees the change shortly; the first
	// VMI made after it is emulated.
	testenv.Eventually(t, 10*time.Second, "the controller sees the cordon", func() (bool, error) {
		return !v1.RequestsKVM(launch(next("cordoned"), nil)), nil
	})
	cordon(false)

	// The node's agent restarts and finds KVM unusable (label false).
	n, err := c.kube.CoreV1().Nodes().Get(ctx, "kvm-node", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Labels[v1.KVMLabel] = "false"
	if _, err := c.kube.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "the controller sees the new verdict", func() (bool, error) {
		pod := launch(next("nokvm"), nil)
		return !v1.RequestsKVM(pod) && vmi.KeptOffKVMNodes(pod), nil
	})
}
