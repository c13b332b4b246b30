package acceptance

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// Scenario 1: the example VM (runStrategy Always) gets one VMI and one
// launcher pod, the VMI runs within 60 s with a node and an IP, the VM
// reports Running and ready.
func testExampleVMRuns(t *testing.T, s *suite) {
	s.demo = "demo"
	start := time.Now()
	s.apply(t, s.example(t, "vm.yaml", s.demo))
	vmi := s.waitVMI(t, s.demo, 60*time.Second, "Running with node and IP", func(vmi *v1.VirtualMachineInstance) bool {
		return vmi.Status.Phase == v1.Running && vmi.Status.NodeName != "" &&
			len(vmi.Status.Interfaces) > 0 && vmi.Status.Interfaces[0].IPAddress != ""
	})
	t.Logf("VMI %s Running after %v on %s, IP %s", vmi.Name, time.Since(start).Round(100*time.Millisecond),
		vmi.Status.NodeName, vmi.Status.Interfaces[0].IPAddress)

	vmis, err := s.virt.KubevirtV1().VirtualMachineInstances(namespace).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n := countNamed(vmis.Items, s.demo); n != 1 {
		t.Errorf("%d VMIs named %s, want 1", n, s.demo)
	}
	pod := s.launcherPod(t, vmi)
	if got := pod.Labels["kubevirt.io"]; got != "virt-launcher" {
		t.Errorf("pod %s label kubevirt.io=%q, want virt-launcher", pod.Name, got)
	}
	if got := pod.Labels["kubevirt.io/created-by"]; got != string(vmi.UID) {
		t.Errorf("pod %s label kubevirt.io/created-by=%q, want %s", pod.Name, got, vmi.UID)
	}
	owner := metav1.GetControllerOf(&pod)
	if owner == nil || owner.UID != vmi.UID || owner.Kind != "VirtualMachineInstance" {
		t.Errorf("pod %s controller owner = %+v, want VMI %s", pod.Name, owner, vmi.UID)
	}
	s.waitVM(t, s.demo, 30*time.Second, "Running and ready", func(vm *v1.VirtualMachine) bool {
		return vm.Status.PrintableStatus == v1.VirtualMachineStatusRunning && vm.Status.Ready
	})
}

func countNamed(vmis []v1.VirtualMachineInstance, name string) int {
	n := 0
	for _, v := range vmis {
		if v.Name == name {
			n++
		}
	}
	return n
}

// Scenario 2: the guest boots (its ready marker on the serial console) and
// its guest agent connects (AgentConnected, guestOSInfo).
func testGuestBoots(t *testing.T, s *suite) {
	vmi := s.demoVMI(t)
	pod := s.launcherPod(t, vmi)
	line := s.waitSerial(t, pod, "NODEVIRT-GUEST-READY", 60*time.Second)
	t.Logf("serial: %s", line)
	vmi = s.waitVMI(t, vmi.Name, 60*time.Second, "AgentConnected with guestOSInfo", func(vmi *v1.VirtualMachineInstance) bool {
		return condition(vmi, v1.VirtualMachineInstanceAgentConnected) == "True" &&
			(vmi.Status.GuestOSInfo.Name != "" || vmi.Status.GuestOSInfo.KernelRelease != "")
	})
	t.Logf("guestOSInfo: %+v", vmi.Status.GuestOSInfo)
}

// Scenario 3: cloudInitNoCloud user-data reaches the guest, which runs the
// script and prints its output between markers.
func testCloudInitUserData(t *testing.T, s *suite) {
	vmi := s.demoVMI(t)
	pod := s.launcherPod(t, vmi)
	s.waitSerial(t, pod, "NODEVIRT-USERDATA-BEGIN", 60*time.Second)
	s.waitSerial(t, pod, "hello from cloud-init user-data", 10*time.Second)
	if end := s.waitSerial(t, pod, "NODEVIRT-USERDATA-END", 10*time.Second); end != "NODEVIRT-USERDATA-END rc=0" {
		t.Errorf("user-data end marker %q, want rc=0", end)
	}
}

// demoVMI returns the running VMI of scenario 1's VM.
func (s *suite) demoVMI(t *testing.T) *v1.VirtualMachineInstance {
	t.Helper()
	if s.demo == "" {
		t.Fatal("scenario 1 did not create the demo VM")
	}
	return s.waitVMI(t, s.demo, 60*time.Second, "Running", phaseIs(v1.Running))
}

// Scenario 15: unchanged KubeVirt-style manifests (v1alpha3 and v1,
// running: true, containerDisk + cloudInitNoCloud + masquerade) apply and
// reach Running.
func testKubeVirtManifests(t *testing.T, s *suite) {
	for _, tc := range []struct{ name, apiVersion string }{
		{"kv-alpha3", "kubevirt.io/v1alpha3"},
		{"kv-v1", "kubevirt.io/v1"},
	} {
		m := s.example(t, "vm-v1alpha3.yaml", tc.name, "apiVersion: kubevirt.io/v1alpha3", "apiVersion: "+tc.apiVersion)
		if !strings.Contains(string(m), "running: true") {
			t.Fatal("example vm-v1alpha3.yaml lost running: true")
		}
		start := time.Now()
		s.apply(t, m)
		vmi := s.waitVMI(t, tc.name, 90*time.Second, "Running", phaseIs(v1.Running))
		t.Logf("%s (%s): VMI Running after %v", tc.name, tc.apiVersion, time.Since(start).Round(100*time.Millisecond))
		pod := s.launcherPod(t, vmi)
		s.waitSerial(t, pod, "NODEVIRT-GUEST-READY", 90*time.Second)
		s.deleteVM(t, tc.name)
	}
}
