package acceptance

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/cluster/liveconfig"
	"github.com/nodevirt/nodevirt/hack/testenv"
)

// Issue 20: the cluster is configured through the KubeVirt resource, live.
// The installation's KubeVirt (hack/deploy-local.sh: no configuration)
// takes deploy/examples/kubevirt.yaml's configuration by a server-side
// apply of its own field manager, which leaves the installation's
// customizeComponents alone. An invalid configuration is refused at
// admission naming the field, and so is a second KubeVirt; another
// cpuAllocationRatio changes the CPU request of the next VMI's launcher
// pod, while a running VMI keeps its pod and its QEMU; removing the
// configuration brings back the defaults.
func testLiveConfiguration(t *testing.T, s *suite) {
	running := s.startVMI(t, "cfg-before")
	defer s.deleteVMI(t, running.Name)
	before := s.launcherPod(t, running)
	qemu := waitQEMU(t, running.Name, 10*time.Second)
	if got := cpuRequest(before); got != 100 {
		t.Fatalf("launcher pod before any KubeVirt requests %dm CPU for one vCPU, want 100m (KubeVirt's ratio 10)", got)
	}

	invalid := s.example(t, "kubevirt.yaml", "", "cpuAllocationRatio: 10", "cpuAllocationRatio: 0")
	apply := []string{"apply", "--server-side", "--field-manager=acceptance-liveconfig", "-f", "-"}
	out, err := s.kubectlErr(invalid, apply...)
	if err == nil || !strings.Contains(out+err.Error(), "spec.configuration.developerConfiguration.cpuAllocationRatio") {
		t.Errorf("KubeVirt with cpuAllocationRatio 0: %v\n%s\nwant a refusal naming the field", err, out)
	}
	t.Logf("refused: %s", strings.TrimSpace(out+" "+errString(err)))

	applied := time.Now()
	s.kubectl(t, s.example(t, "kubevirt.yaml", "", "cpuAllocationRatio: 10", "cpuAllocationRatio: 2"), apply...)
	defer s.kubectl(t, nil, "patch", "kubevirt", "-n", "nodevirt", "kubevirt", "--type=json", "-p", `[{"op":"remove","path":"/spec/configuration"}]`)
	s.waitEventOn(t, "nodevirt", "kubevirt", liveconfig.ReasonApplied, applied, 30*time.Second)
	t.Logf("configuration in force %v after kubectl apply", time.Since(applied).Round(time.Millisecond))
	// The installation is not touched: the operator still sees it Deployed.
	if out := s.kubectl(t, nil, "get", "kubevirt", "-n", "nodevirt", "kubevirt", "-o", "jsonpath={.spec.customizeComponents.patches[*].resourceName}"); !strings.Contains(out, "nodevirt-agent") {
		t.Errorf("the installation's customizeComponents after the configuration was applied: %q", out)
	}

	// A second KubeVirt is refused (deploy/admission).
	second := s.example(t, "kubevirt.yaml", "second")
	if out, err := s.kubectlErr(second, "apply", "-f", "-"); err == nil || !strings.Contains(out+errString(err), "a cluster has one KubeVirt") {
		t.Errorf("a second KubeVirt: %v\n%s\nwant a refusal", err, out)
	}

	after := s.startVMI(t, "cfg-after")
	defer s.deleteVMI(t, after.Name)
	if got := cpuRequest(s.launcherPod(t, after)); got != 500 {
		t.Errorf("launcher pod after cpuAllocationRatio 2 requests %dm CPU for one vCPU, want 500m", got)
	}
	now := s.launcherPod(t, running)
	if now.UID != before.UID || cpuRequest(now) != 100 {
		t.Errorf("running VMI's pod after the change: uid %s -> %s, cpu %dm; want the same pod with 100m", before.UID, now.UID, cpuRequest(now))
	}
	if pid := qemuPid(running.Name); pid != qemu {
		t.Errorf("running VMI's QEMU pid %d -> %d: disturbed by a configuration change", qemu, pid)
	}
	if v := s.waitVMI(t, running.Name, 5*time.Second, "Running", phaseIs(v1.Running)); v.UID != running.UID {
		t.Errorf("running VMI replaced")
	}
}

// cpuRequest is the compute container's CPU request in millicores.
func cpuRequest(pod corev1.Pod) int64 {
	return pod.Spec.Containers[0].Resources.Requests.Cpu().MilliValue()
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// waitEventOn waits for an event with reason on the object name in ns,
// last seen at since or later (events have second precision).
func (s *suite) waitEventOn(t *testing.T, ns, name, reason string, since time.Time, timeout time.Duration) {
	t.Helper()
	testenv.Eventually(t, timeout, "event "+reason+" on "+ns+"/"+name, func() (bool, error) {
		evs, err := s.kube.CoreV1().Events(ns).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.InvolvedObject.Name == name && e.Reason == reason && !e.LastTimestamp.Time.Before(since.Truncate(time.Second)) {
				return true, nil
			}
		}
		return false, nil
	})
}
