package acceptance

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/cluster/vmi"
	"github.com/nodevirt/nodevirt/hack/testenv"
)

// Issue 20: per-node emulation, automatic. Each node's agent labels it with
// its KVM verdict (nodevirt.io/kvm); under useEmulation auto, the deployed
// default, a VMI gets KVM when a node with KVM fits it and TCG elsewhere.
// This cluster's nodes have no usable KVM: the VMI runs under TCG, its
// launcher pod requests no /dev/kvm and is kept off KVM nodes, and
// `kubectl get vmi -o wide` shows the accelerator.
func testAccelerator(t *testing.T, s *suite) {
	cm, err := s.kube.CoreV1().ConfigMaps("nodevirt").Get(t.Context(), "nodevirt-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if mode, set := cm.Data["useEmulation"]; set && mode != string(vmi.EmulationAuto) {
		t.Fatalf("nodevirt was deployed with useEmulation %q, want auto (the default)", mode)
	}
	_, statErr := os.Stat("/dev/kvm")
	hostHasKVM := statErr == nil
	var kvmNodes int
	testenv.Eventually(t, 30*time.Second, "every VM node labelled with its agent's KVM verdict", func() error {
		nodes, err := s.kube.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{LabelSelector: v1.SchedulableLabel + "=true"})
		if err != nil {
			return err
		}
		if len(nodes.Items) == 0 {
			return errors.New("no VM node yet")
		}
		kvmNodes = 0
		for _, n := range nodes.Items {
			verdict, ok := n.Labels[v1.KVMLabel]
			if !ok {
				return fmt.Errorf("node %s has no %s label", n.Name, v1.KVMLabel)
			}
			if !hostHasKVM && verdict != "false" {
				t.Fatalf("node %s: %s=%s on a host without /dev/kvm", n.Name, v1.KVMLabel, verdict)
			}
			if verdict == "true" {
				kvmNodes++
			}
		}
		return nil
	})
	want, wantKVMRequest := v1.AcceleratorTCG, false
	if kvmNodes > 0 {
		want, wantKVMRequest = v1.AcceleratorKVM, true
	}

	const name = "accel"
	started := s.startVMI(t, name)
	defer s.deleteVMI(t, name)
	pod := s.launcherPod(t, started)
	if got := v1.RequestsKVM(&pod); got != wantKVMRequest {
		t.Errorf("launcher pod requests devices.kubevirt.io/kvm: %t, want %t (%d KVM nodes)", got, wantKVMRequest, kvmNodes)
	}
	if got := vmi.KeptOffKVMNodes(&pod); got == wantKVMRequest {
		t.Errorf("launcher pod kept off KVM nodes: %t, want %t", got, !wantKVMRequest)
	}
	got := s.waitVMI(t, name, 30*time.Second, "status.accelerator "+string(want), func(v *v1.VirtualMachineInstance) bool {
		return v.Status.Accelerator == want
	})
	t.Logf("VMI %s on %s: accelerator %s (%d KVM nodes)", name, got.Status.NodeName, got.Status.Accelerator, kvmNodes)

	out := s.kubectl(t, nil, "get", "vmi", "-n", namespace, name, "-o", "wide")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "ACCELERATOR") || !strings.Contains(lines[1], string(want)) {
		t.Errorf("kubectl get vmi -o wide shows no %s accelerator:\n%s", want, out)
	}
}
