package acceptance

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/e2e/localcluster"
	"github.com/nodevirt/nodevirt/hack/testenv"
)

// vmiManifest is the bare example VMI renamed, with edits.
func (s *suite) vmiManifest(t *testing.T, name string, edits ...string) []byte {
	t.Helper()
	return s.example(t, "vmi.yaml", name, edits...)
}

// vmManifest is the example VM renamed, with its runStrategy set and the
// guest's user-data replaced by script (a shell script body).
func (s *suite) vmManifest(t *testing.T, name, runStrategy, script string) []byte {
	t.Helper()
	edits := []string{"runStrategy: Always", "runStrategy: " + runStrategy}
	if script != "" {
		edits = append(edits, `echo "hello from cloud-init user-data on $(hostname)"`, script)
	}
	return s.example(t, "vm.yaml", name, edits...)
}

// startVMI creates the example VMI as name and waits until the guest is up.
func (s *suite) startVMI(t *testing.T, name string, edits ...string) *v1.VirtualMachineInstance {
	t.Helper()
	s.apply(t, s.vmiManifest(t, name, edits...))
	vmi := s.waitVMI(t, name, 60*time.Second, "Running", phaseIs(v1.Running))
	s.waitSerial(t, s.launcherPod(t, vmi), "NODEVIRT-GUEST-READY", 60*time.Second)
	return vmi
}

// Scenario 9: deleting the launcher pod through the API ends the VMI in a
// final phase.
func testLauncherPodDeleted(t *testing.T, s *suite) {
	const name = "podgone"
	vmi := s.startVMI(t, name)
	pod := s.launcherPod(t, vmi)
	s.kubectl(t, nil, "delete", "pod", "-n", namespace, pod.Name, "--wait=false")
	vmi = s.waitVMI(t, name, 60*time.Second, "in a final phase", isFinal)
	t.Logf("VMI %s after its pod was deleted: %s", name, statusLine(vmi))
	s.deleteVMI(t, name)
}

// Scenario 6: runStrategy semantics.
func testRunStrategies(t *testing.T, s *suite) {
	t.Run("AlwaysToHalted", func(t *testing.T) {
		vmi := s.demoVMI(t)
		pod := s.launcherPod(t, vmi)
		s.waitSerial(t, pod, "NODEVIRT-GUEST-READY", 60*time.Second)
		w := s.watchVMI(t, vmi)
		s.patchRunStrategy(t, s.demo, "Halted")
		s.waitSerial(t, pod, "NODEVIRT-GUEST-POWERDOWN", 30*time.Second)
		if got := w.waitPhase(t, v1.Succeeded, 60*time.Second); got != v1.Succeeded {
			t.Errorf("VMI %s ended %s, want Succeeded", vmi.Name, got)
		}
		s.waitPodsGone(t, string(vmi.UID), 30*time.Second)
		s.waitVMIGone(t, s.demo, "", 30*time.Second)
		t.Run("HaltedToAlways", func(t *testing.T) {
			s.patchRunStrategy(t, s.demo, "Always")
			nv := s.waitNewVMI(t, s.demo, string(vmi.UID), 30*time.Second)
			t.Logf("new VMI %s (was %s)", nv.UID, vmi.UID)
			s.waitVMI(t, s.demo, 60*time.Second, "Running", func(v *v1.VirtualMachineInstance) bool {
				return v.UID == nv.UID && v.Status.Phase == v1.Running
			})
		})
	})
	t.Run("AlwaysVMIDeleted", func(t *testing.T) {
		vmi := s.demoVMI(t)
		// A guest still booting has no acpid yet and would sit out the
		// whole grace period.
		s.waitSerial(t, s.launcherPod(t, vmi), "NODEVIRT-GUEST-READY", 60*time.Second)
		s.kubectl(t, nil, "delete", "vmi", "-n", namespace, vmi.Name, "--wait=false")
		nv := s.waitNewVMI(t, s.demo, string(vmi.UID), 90*time.Second)
		t.Logf("VMI %s replaced: %s -> %s", s.demo, vmi.UID, nv.UID)
		nv = s.waitVMI(t, s.demo, 60*time.Second, "Running", phaseIs(v1.Running))
		s.waitSerial(t, s.launcherPod(t, nv), "NODEVIRT-GUEST-READY", 60*time.Second)
		s.deleteVM(t, s.demo) // frees the CPU for the scenarios after this one
	})
	// The guest powers itself off shortly after boot.
	const poweroff = "(sleep 2; poweroff) &"
	t.Run("OnceGuestShutdown", func(t *testing.T) {
		const name = "once"
		s.apply(t, s.vmManifest(t, name, "Once", poweroff))
		vmi := s.waitVMI(t, name, 60*time.Second, "Running", phaseIs(v1.Running))
		s.waitVMI(t, name, 60*time.Second, "Succeeded", phaseIs(v1.Succeeded))
		s.expectNoNewVMI(t, name, string(vmi.UID), 10*time.Second)
		s.deleteVM(t, name)
	})
	t.Run("RerunOnFailure", func(t *testing.T) {
		const name = "rerun"
		s.apply(t, s.vmManifest(t, name, "RerunOnFailure", ""))
		vmi := s.waitVMI(t, name, 60*time.Second, "Running", phaseIs(v1.Running))
		killQEMU(t, name)
		s.waitVMI(t, name, 30*time.Second, "Failed", func(v *v1.VirtualMachineInstance) bool {
			return v.UID != vmi.UID || v.Status.Phase == v1.Failed
		})
		nv := s.waitNewVMI(t, name, string(vmi.UID), 90*time.Second)
		t.Logf("crashed VMI %s replaced by %s", vmi.UID, nv.UID)
		s.deleteVM(t, name)

		const name2 = "rerun-shutdown"
		s.apply(t, s.vmManifest(t, name2, "RerunOnFailure", poweroff))
		vmi = s.waitVMI(t, name2, 60*time.Second, "Running", phaseIs(v1.Running))
		// As KubeVirt, the Succeeded VMI is deleted and none follows.
		s.waitVMIGone(t, name2, "", 90*time.Second)
		s.expectNoNewVMI(t, name2, string(vmi.UID), 10*time.Second)
		s.deleteVM(t, name2)
	})
	t.Run("Manual", func(t *testing.T) {
		const name = "manual"
		s.apply(t, s.vmManifest(t, name, "Manual", ""))
		s.expectNoNewVMI(t, name, "", 8*time.Second)
		s.deleteVM(t, name)
	})
}

// Scenario 7: SIGKILL of QEMU fails the VMI quickly with a Stopped warning;
// an Always VM gets a new VMI; repeated crashes reach CrashLoopBackOff.
func testQEMUKilled(t *testing.T, s *suite) {
	const name = "crashy"
	s.apply(t, s.vmManifest(t, name, "Always", ""))
	defer s.deleteVM(t, name)
	vmi := s.waitVMI(t, name, 60*time.Second, "Running", phaseIs(v1.Running))
	w := s.watchVMI(t, vmi)
	killed := killQEMU(t, name)
	if got := w.waitPhase(t, v1.Failed, 10*time.Second); got != v1.Failed {
		t.Fatalf("VMI %s after SIGKILL of QEMU: %s, want Failed", name, got)
	}
	t.Logf("VMI Failed %v after SIGKILL", time.Since(killed).Round(10*time.Millisecond))
	s.waitEvent(t, string(vmi.UID), "Warning", "Stopped", 10*time.Second)

	// Second crash: the VM backs off and says so.
	s.waitNewVMI(t, name, string(vmi.UID), 2*time.Minute)
	vmi = s.waitVMI(t, name, 60*time.Second, "Running", phaseIs(v1.Running))
	w = s.watchVMI(t, vmi)
	killQEMU(t, name)
	if got := w.waitPhase(t, v1.Failed, 10*time.Second); got != v1.Failed {
		t.Fatalf("VMI %s after the second SIGKILL: %s, want Failed", name, got)
	}
	vm := s.waitVM(t, name, 20*time.Second, "CrashLoopBackOff", func(vm *v1.VirtualMachine) bool {
		return vm.Status.PrintableStatus == v1.VirtualMachineStatusCrashLoopBackOff && vm.Status.StartFailure != nil &&
			vm.Status.StartFailure.ConsecutiveFailCount >= 2
	})
	t.Logf("after 2 crashes: %s, startFailure %+v", vm.Status.PrintableStatus, *vm.Status.StartFailure)
}

// killQEMU SIGKILLs the QEMU of VMI name and returns when.
func killQEMU(t *testing.T, name string) time.Time {
	t.Helper()
	pid := waitQEMU(t, name, 30*time.Second)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill QEMU %d of %s: %v", pid, name, err)
	}
	return time.Now()
}

// patchRunStrategy sets the VM's runStrategy with kubectl patch.
func (s *suite) patchRunStrategy(t *testing.T, name, strategy string) {
	t.Helper()
	s.kubectl(t, nil, "patch", "vm", "-n", namespace, name, "--type=merge",
		"-p", fmt.Sprintf(`{"spec":{"runStrategy":%q}}`, strategy))
}

// expectNoNewVMI checks for the window d that VMI name does not come back
// with a UID other than old (old "" = does not appear at all). A negative
// claim needs an observation window; d bounds it.
func (s *suite) expectNoNewVMI(t *testing.T, name, old string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		vmi, err := s.virt.KubevirtV1().VirtualMachineInstances(namespace).Get(t.Context(), name, metav1.GetOptions{})
		if err == nil && string(vmi.UID) != old {
			t.Fatalf("VMI %s was (re)created: %s", name, statusLine(vmi))
		}
		time.Sleep(poll)
	}
}

// Scenario 10: a guest that ignores ACPI with a 5 s grace period is stopped
// about 5 s after deletion, leaving nothing behind.
func testGracePeriod(t *testing.T, s *suite) {
	const name = "grace"
	vmi := s.startVMI(t, name,
		"kernelArgs: console=ttyS0 quiet panic=-1", "kernelArgs: console=ttyS0 quiet panic=-1 nodevirt.ignore_acpi=1",
		"spec:\n  domain:", "spec:\n  terminationGracePeriodSeconds: 5\n  domain:")
	pod := s.launcherPod(t, vmi)
	podDir := s.podDir(t, pod)
	pid := waitQEMU(t, name, 10*time.Second)
	deleted := time.Now()
	s.kubectl(t, nil, "delete", "vmi", "-n", namespace, name, "--wait=false")
	testenv.Eventually(t, time.Until(deleted.Add(30*time.Second)), fmt.Sprintf("QEMU %d to exit within 30 s of the deletion", pid),
		func() bool { return !localcluster.ProcessAlive(pid) })
	took := time.Since(deleted)
	t.Logf("QEMU stopped %v after deletion (grace period 5 s)", took.Round(10*time.Millisecond))
	if took < 4*time.Second || took > 12*time.Second {
		t.Errorf("QEMU stopped %v after deletion, want about 5 s", took)
	}
	s.waitVMIGone(t, name, "", 60*time.Second)
	s.waitPodsGone(t, string(vmi.UID), 60*time.Second)
	// The kubelet removes a deleted pod's directory (with the sockets
	// emptyDir) in its housekeeping, a few seconds later.
	for end := time.Now().Add(60 * time.Second); ; {
		if _, err := os.Stat(podDir); os.IsNotExist(err) {
			break
		}
		if time.Now().After(end) {
			t.Errorf("pod dir %s (sockets, serial log) left behind 60 s after the pod was gone", podDir)
			break
		}
		time.Sleep(poll)
	}
	if qemuPid(name) != 0 {
		t.Errorf("a QEMU for %s is left", name)
	}
}

// vmiWatch records the phases one VMI goes through, including its last
// state when it is deleted.
type vmiWatch struct {
	phases chan v1.VirtualMachineInstancePhase
}

// watchVMI starts watching vmi; the watch ends with the test.
func (s *suite) watchVMI(t *testing.T, vmi *v1.VirtualMachineInstance) *vmiWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	wi, err := s.virt.KubevirtV1().VirtualMachineInstances(namespace).Watch(ctx, metav1.ListOptions{
		FieldSelector:   "metadata.name=" + vmi.Name,
		ResourceVersion: vmi.ResourceVersion,
	})
	if err != nil {
		t.Fatal(err)
	}
	w := &vmiWatch{phases: make(chan v1.VirtualMachineInstancePhase, 64)}
	go func() {
		defer wi.Stop()
		for ev := range wi.ResultChan() {
			if v, ok := ev.Object.(*v1.VirtualMachineInstance); ok && v.UID == vmi.UID {
				select {
				case w.phases <- v.Status.Phase:
				default:
				}
			}
		}
	}()
	return w
}

// waitPhase waits for phase want and returns it, or the last phase seen
// when the timeout ends first.
func (w *vmiWatch) waitPhase(t *testing.T, want v1.VirtualMachineInstancePhase, timeout time.Duration) v1.VirtualMachineInstancePhase {
	t.Helper()
	var last v1.VirtualMachineInstancePhase
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		select {
		case p := <-w.phases:
			last = p
			if p == want {
				return p
			}
		case <-timer.C:
			return last
		}
	}
}
