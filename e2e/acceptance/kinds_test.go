package acceptance

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/e2e/localcluster"
	"github.com/nodevirt/nodevirt/hack/testenv"
)

// Issue 19 on the cluster: KubeVirt's kinds and domain fields beyond a
// plain VM, each one a VM (or a set of them) booted from the test guest.

// firmwareProbe (one line of user-data) prints what the guest sees of the
// firmware and devices, one PROBE-KEY=value line each, then PROBE-END.
const firmwareProbe = `echo "PROBE-EFI=$(test -d /sys/firmware/efi && echo yes || echo no)"; ` +
	`echo "PROBE-SECUREBOOT=$(dmesg | grep -o 'Secure boot [a-z]*' | head -n 1)"; ` +
	`echo "PROBE-RNG=$(cat /sys/class/misc/hw_random/rng_available)"; ` +
	`echo "PROBE-SERIAL=$(cat /sys/class/dmi/id/product_serial)"; ` +
	`echo "PROBE-UUID=$(cat /sys/class/dmi/id/product_uuid)"; ` +
	`echo "PROBE-TPM=$(cat /sys/class/tpm/tpm0/tpm_version_major 2>/dev/null || echo none)"; ` +
	`echo "PROBE-CPUS=$(grep -c ^processor /proc/cpuinfo)"; ` +
	`echo "PROBE-MEMKB=$(sed -n 's/^MemTotal: *\([0-9]*\) kB/\1/p' /proc/meminfo)"; echo PROBE-END`

// probeLines waits for PROBE-END on the pod's serial log and returns the
// guest's PROBE-KEY=value lines as a map.
func (s *suite) probeLines(t *testing.T, vmi *v1.VirtualMachineInstance, timeout time.Duration) map[string]string {
	t.Helper()
	pod := s.launcherPod(t, vmi)
	s.waitSerial(t, pod, "PROBE-END", timeout)
	b, err := os.ReadFile(s.serialLog(t, pod))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(strings.TrimRight(l, "\r"), "="); ok && strings.HasPrefix(k, "PROBE-") {
			got[strings.TrimPrefix(k, "PROBE-")] = v
		}
	}
	t.Logf("guest of VMI %s saw %q", vmi.Name, got)
	return got
}

// testInstancetypeVM: a VM whose CPU and memory come from a namespaced
// VirtualMachineInstancetype and whose disk bus from a cluster-wide
// VirtualMachineClusterPreference boots with them; the VM's status names
// the ControllerRevisions it captured, and a later edit of the instancetype
// does not change the running VMI. The guest's SMBIOS UUID is the VM's uid.
func testInstancetypeVM(t *testing.T, s *suite) {
	const name, it, pref = "it-vm", "e2e-it-small", "e2e-pref-virtio"
	s.apply(t, []byte(fmt.Sprintf(`apiVersion: instancetype.kubevirt.io/v1beta1
kind: VirtualMachineInstancetype
metadata: {name: %s}
spec:
  cpu: {guest: 2}
  memory: {guest: 160Mi}
---
apiVersion: instancetype.kubevirt.io/v1beta1
kind: VirtualMachineClusterPreference
metadata: {name: %s}
spec:
  devices: {preferredDiskBus: virtio}
  cpu: {preferredCPUTopology: cores}
`, it, pref)))
	t.Cleanup(func() {
		s.kubectl(t, nil, "delete", "-n", namespace, "virtualmachineinstancetype", it, "--ignore-not-found")
		s.kubectl(t, nil, "delete", "virtualmachineclusterpreference", pref, "--ignore-not-found")
	})
	m := s.vmManifest(t, name, "Always", firmwareProbe)
	m = edit(t, m,
		"        cpu:\n          cores: 1\n        memory:\n          guest: 128Mi\n", "",
		"spec:\n  runStrategy: Always\n", fmt.Sprintf("spec:\n  runStrategy: Always\n  instancetype: {kind: VirtualMachineInstancetype, name: %s}\n  preference: {kind: VirtualMachineClusterPreference, name: %s}\n", it, pref),
		"            disk:\n              bus: virtio\n", "            disk: {}\n")
	s.apply(t, m)
	t.Cleanup(func() { s.deleteVM(t, name) })
	vmi := s.waitVMI(t, name, 120*time.Second, "Running", phaseIs(v1.Running))
	got := s.probeLines(t, vmi, 120*time.Second)
	if got["CPUS"] != "2" {
		t.Errorf("guest has %s CPUs, want 2 (instancetype cpu.guest)", got["CPUS"])
	}
	d := vmi.Spec.Domain
	if d.CPU == nil || d.CPU.Cores != 2 || d.CPU.Sockets != 1 {
		t.Errorf("VMI cpu = %+v, want 2 cores in 1 socket (preferredCPUTopology cores)", d.CPU)
	}
	if d.Memory == nil || d.Memory.Guest == nil || !d.Memory.Guest.Equal(resource.MustParse("160Mi")) {
		t.Errorf("VMI memory = %+v, want guest 160Mi (instancetype memory.guest)", d.Memory)
	}
	if len(d.Devices.Disks) == 0 || d.Devices.Disks[0].Disk == nil || d.Devices.Disks[0].Disk.Bus != v1.DiskBusVirtio {
		t.Errorf("VMI disks = %+v, want bus virtio (preference preferredDiskBus)", d.Devices.Disks)
	}
	vm := s.waitVM(t, name, 30*time.Second, "revisions captured", func(vm *v1.VirtualMachine) bool {
		return vm.Status.InstancetypeRef != nil && vm.Status.InstancetypeRef.ControllerRevisionRef != nil &&
			vm.Status.PreferenceRef != nil && vm.Status.PreferenceRef.ControllerRevisionRef != nil
	})
	if got["UUID"] != string(vm.UID) {
		t.Errorf("product_uuid = %q, want the VM's uid %s (firmware.uuid unset)", got["UUID"], vm.UID)
	}
	for _, ref := range []*v1.ControllerRevisionRef{vm.Status.InstancetypeRef.ControllerRevisionRef, vm.Status.PreferenceRef.ControllerRevisionRef} {
		if _, err := s.kube.AppsV1().ControllerRevisions(namespace).Get(context.Background(), ref.Name, metav1.GetOptions{}); err != nil {
			t.Errorf("ControllerRevision %s: %v", ref.Name, err)
		}
	}
	// An edit of the instancetype leaves the running VMI as it was.
	s.kubectl(t, nil, "patch", "-n", namespace, "virtualmachineinstancetype", it, "--type=merge", "-p", `{"spec":{"cpu":{"guest":1}}}`)
	time.Sleep(3 * time.Second)
	now, err := s.virt.KubevirtV1().VirtualMachineInstances(namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if now.UID != vmi.UID || now.Spec.Domain.CPU == nil || now.Spec.Domain.CPU.Cores != 2 {
		t.Errorf("after the instancetype edit: VMI %s cpu %+v, want the same VMI with 2 cores", now.UID, now.Spec.Domain.CPU)
	}
}

// testEFIVM: bootloader.efi without secure boot boots the guest's bzImage
// through OVMF (kernelBoot), with virtio-rng, a vTPM and an SMBIOS serial;
// the guest sees EFI, the rng device, a TPM 2.0 and the serial.
func testEFIVM(t *testing.T, s *suite) {
	const name, serial = "efi-vm", "nodevirt-e2e-19"
	m := s.vmManifest(t, name, "Always", firmwareProbe)
	m = edit(t, m,
		"          guest: 128Mi\n", "          guest: 256Mi\n",
		"        firmware:\n", "        firmware:\n          serial: "+serial+"\n          bootloader:\n            efi: {secureBoot: false}\n",
		"kernelPath: /boot/vmlinux", "kernelPath: /boot/bzImage",
		"        devices:\n", "        devices:\n          rng: {}\n          tpm: {}\n")
	start := time.Now()
	s.apply(t, m)
	t.Cleanup(func() { s.deleteVM(t, name) })
	vmi := s.waitVMI(t, name, 120*time.Second, "Running", phaseIs(v1.Running))
	got := s.probeLines(t, vmi, 4*time.Minute)
	t.Logf("MEASURE %s: VM created -> guest probed through OVMF %v", name, time.Since(start).Round(100*time.Millisecond))
	if got["EFI"] != "yes" {
		t.Errorf("/sys/firmware/efi: %s, want yes (bootloader.efi)", got["EFI"])
	}
	if got["SECUREBOOT"] != "Secure boot disabled" {
		t.Errorf("kernel says %q, want Secure boot disabled (efi.secureBoot: false)", got["SECUREBOOT"])
	}
	if !strings.Contains(got["RNG"], "virtio_rng") {
		t.Errorf("rng_available = %q, want virtio_rng (devices.rng)", got["RNG"])
	}
	if got["TPM"] != "2" {
		t.Errorf("TPM version %q, want 2 (devices.tpm)", got["TPM"])
	}
	if got["SERIAL"] != serial {
		t.Errorf("product_serial = %q, want %q (firmware.serial)", got["SERIAL"], serial)
	}
}

// testSecureBootVM: efi.secureBoot with features.smm runs QEMU on the
// secure-boot OVMF (Microsoft keys enrolled) with SMM. Debian's kernel is
// signed by Debian's shim key, not Microsoft's: when the firmware starts it
// anyway the kernel must report secure boot on.
func testSecureBootVM(t *testing.T, s *suite) {
	const name = "secureboot-vm"
	m := s.vmManifest(t, name, "Always", firmwareProbe)
	m = edit(t, m,
		"          guest: 128Mi\n", "          guest: 256Mi\n",
		"        firmware:\n", "        features:\n          smm: {enabled: true}\n        firmware:\n          bootloader:\n            efi: {secureBoot: true}\n",
		"kernelPath: /boot/vmlinux", "kernelPath: /boot/bzImage")
	s.apply(t, m)
	t.Cleanup(func() { s.deleteVM(t, name) })
	vmi := s.waitVMI(t, name, 120*time.Second, "Running", phaseIs(v1.Running))
	pid := waitQEMU(t, name, 30*time.Second)
	b, err := os.ReadFile(filepath.Join("/proc", fmt.Sprint(pid), "cmdline"))
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Split(string(b), "\x00")
	if !slices.ContainsFunc(args, func(a string) bool { return strings.Contains(a, "OVMF_CODE_4M.secboot.fd") }) {
		t.Errorf("QEMU does not run the secure-boot OVMF: %q", args)
	}
	if !slices.ContainsFunc(args, func(a string) bool { return strings.Contains(a, "smm=on") }) {
		t.Errorf("QEMU runs without smm=on: %q", args)
	}
	pod := s.launcherPod(t, vmi)
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		log, _ := os.ReadFile(s.serialLog(t, pod))
		if strings.Contains(string(log), "PROBE-END") {
			got := s.probeLines(t, vmi, time.Second)
			if got["EFI"] != "yes" || got["SECUREBOOT"] != "Secure boot enabled" {
				t.Errorf("the kernel booted under the secure-boot firmware with EFI %q, %q; want yes, Secure boot enabled", got["EFI"], got["SECUREBOOT"])
			}
			return
		}
		time.Sleep(2 * time.Second)
	}
	now, err := s.virt.KubevirtV1().VirtualMachineInstances(namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil || now.Status.Phase != v1.Running || qemuPid(name) != pid {
		t.Fatalf("the secure-boot VM did not stay running: %v, phase %v", err, now.Status.Phase)
	}
	t.Logf("the secure-boot firmware did not start the Debian-signed kernel (not in Microsoft's db); QEMU %d runs on", pid)
}

// testTPMKernelRefused: a vTPM with a PVH vmlinux kernel boot under BIOS
// (which QEMU 7.2 would boot without ACPI) fails to launch, and the VMI's
// events say why, naming the fields.
func testTPMKernelRefused(t *testing.T, s *suite) {
	const name = "tpm-pvh"
	s.apply(t, s.vmiManifest(t, name, "    devices:\n", "    devices:\n      tpm: {}\n"))
	t.Cleanup(func() { s.deleteVMI(t, name) })
	vmi := s.waitVMI(t, name, 2*time.Minute, "Failed", phaseIs(v1.Failed))
	e := s.waitEventWhere(t, string(vmi.UID), "an event naming spec.domain.devices.tpm", 30*time.Second, func(e corev1.Event) bool {
		return strings.Contains(e.Message, "the launch failed: spec.domain.devices.tpm with spec.domain.firmware.kernelBoot")
	})
	t.Logf("event %s: %s", e.Reason, e.Message)
}

// guestSpec is the test guest's VMI spec.
const guestSpec = localcluster.GuestSpec

// testReplicaSetScale: a VirtualMachineInstanceReplicaSet with 0 replicas
// is scaled to 3 and then to 1 with kubectl scale (the scale subresource);
// status.readyReplicas follows, and the VMIs are the set's.
func testReplicaSetScale(t *testing.T, s *suite) {
	const name = "e2e-rs"
	s.apply(t, []byte(fmt.Sprintf(`apiVersion: kubevirt.io/v1
kind: VirtualMachineInstanceReplicaSet
metadata: {name: %[1]s}
spec:
  replicas: 0
  selector:
    matchLabels: {e2e-rs: %[1]s}
  template:
    metadata:
      labels: {e2e-rs: %[1]s}
    spec: %[2]s
`, name, guestSpec)))
	t.Cleanup(func() {
		s.kubectl(t, nil, "delete", "-n", namespace, "vmirs", name, "--ignore-not-found", "--wait=true", "--timeout=120s")
		s.waitSetVMIs(t, name, 0, 2*time.Minute)
	})
	for _, n := range []int{3, 1} {
		start := time.Now()
		s.kubectl(t, nil, "scale", "-n", namespace, "vmirs", name, fmt.Sprintf("--replicas=%d", n))
		s.waitSetVMIs(t, name, n, 4*time.Minute)
		testenv.Eventually(t, 3*time.Minute, fmt.Sprintf("replica set %s: readyReplicas %d", name, n), func() error {
			rs, err := s.virt.KubevirtV1().VirtualMachineInstanceReplicaSets(namespace).Get(context.Background(), name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if rs.Status.Replicas != int32(n) || rs.Status.ReadyReplicas != int32(n) {
				return fmt.Errorf("status replicas %d, ready %d", rs.Status.Replicas, rs.Status.ReadyReplicas)
			}
			return nil
		})
		t.Logf("MEASURE kubectl scale vmirs --replicas=%d -> %d ready: %v", n, n, time.Since(start).Round(100*time.Millisecond))
	}
	out := s.kubectl(t, nil, "get", "-n", namespace, "vmirs", name, "-o", "jsonpath={.spec.replicas} {.status.labelSelector}")
	if !strings.HasPrefix(out, "1 ") || !strings.Contains(out, "e2e-rs="+name) {
		t.Errorf("replicas and selector = %q, want 1 and the label selector (scale subresource)", out)
	}
}

// waitSetVMIs waits until exactly n live VMIs carry the replica set's label.
func (s *suite) waitSetVMIs(t *testing.T, name string, n int, timeout time.Duration) {
	t.Helper()
	testenv.Eventually(t, timeout, fmt.Sprintf("%d VMIs of replica set %s", n, name), func() error {
		list, err := s.virt.KubevirtV1().VirtualMachineInstances(namespace).List(context.Background(), metav1.ListOptions{LabelSelector: "e2e-rs=" + name})
		if err != nil {
			return err
		}
		var live []string
		for _, v := range list.Items {
			if v.DeletionTimestamp == nil && !v.Status.Phase.IsFinal() {
				live = append(live, v.Name+"/"+string(v.Status.Phase))
			}
		}
		if len(live) != n || len(list.Items) != n {
			return fmt.Errorf("VMIs: %v (%d objects)", live, len(list.Items))
		}
		return nil
	})
}

// testPool: a VirtualMachinePool of two VMs named <pool>-0 and <pool>-1
// runs both; scaled in to one with kubectl scale, it keeps <pool>-0 (its
// scale-in policy is DescendingOrder; the default, Random, is covered by
// cluster/pool's integration test); a template change then replaces
// <pool>-0's VMI with one of the new template.
func testPool(t *testing.T, s *suite) {
	const name = "e2e-pool"
	s.apply(t, []byte(fmt.Sprintf(`apiVersion: pool.kubevirt.io/v1alpha1
kind: VirtualMachinePool
metadata: {name: %[1]s}
spec:
  replicas: 2
  scaleInStrategy:
    proactive:
      selectionPolicy: {basePolicy: DescendingOrder}
  selector:
    matchLabels: {e2e-pool: %[1]s}
  virtualMachineTemplate:
    metadata:
      labels: {e2e-pool: %[1]s}
    spec:
      runStrategy: Always
      template:
        metadata:
          labels: {e2e-pool: %[1]s}
        spec: %[2]s
`, name, guestSpec)))
	t.Cleanup(func() {
		s.kubectl(t, nil, "delete", "-n", namespace, "vmpool", name, "--ignore-not-found", "--wait=true", "--timeout=120s")
		for _, vm := range []string{name + "-0", name + "-1"} {
			s.waitVMIGone(t, vm, "", 2*time.Minute)
		}
	})
	for _, vm := range []string{name + "-0", name + "-1"} {
		vmi := s.waitVMI(t, vm, 4*time.Minute, "Running", phaseIs(v1.Running))
		s.waitSerial(t, s.launcherPod(t, vmi), "NODEVIRT-GUEST-READY", 2*time.Minute)
	}
	testenv.Eventually(t, 2*time.Minute, "pool readyReplicas 2", func() error {
		out := s.kubectl(t, nil, "get", "-n", namespace, "vmpool", name, "-o", "jsonpath={.status.readyReplicas}")
		if out != "2" {
			return fmt.Errorf("readyReplicas %q", out)
		}
		return nil
	})
	s.kubectl(t, nil, "scale", "-n", namespace, "vmpool", name, "--replicas=1")
	s.waitVMIGone(t, name+"-1", "", 2*time.Minute)
	testenv.Eventually(t, 2*time.Minute, "VM "+name+"-1 deleted", func() error {
		_, err := s.kubectlErr(nil, "get", "-n", namespace, "vm", name+"-1")
		if err == nil {
			return fmt.Errorf("VM %s-1 still there", name)
		}
		return nil
	})
	before, err := s.virt.KubevirtV1().VirtualMachineInstances(namespace).Get(context.Background(), name+"-0", metav1.GetOptions{})
	if err != nil || before.Status.Phase != v1.Running {
		t.Fatalf("after scale-in: VMI %s-0: %v (the lowest index stays)", name, err)
	}

	// A template change rolls out: the VM gets the new template and its
	// VMI is replaced by one made from it (KubeVirt's proactive update).
	s.kubectl(t, nil, "patch", "-n", namespace, "vmpool", name, "--type=merge", "-p",
		`{"spec":{"virtualMachineTemplate":{"spec":{"template":{"metadata":{"labels":{"e2e-rollout":"2"}}}}}}}`)
	vmi := s.waitVMI(t, name+"-0", 4*time.Minute, "replaced by a VMI of the new template, Running", func(vmi *v1.VirtualMachineInstance) bool {
		return vmi.UID != before.UID && vmi.Labels["e2e-rollout"] == "2" && vmi.Status.Phase == v1.Running
	})
	s.waitSerial(t, s.launcherPod(t, vmi), "NODEVIRT-GUEST-READY", 2*time.Minute)
	if rev := vmi.Labels[v1.VirtualMachinePoolRevisionName]; rev == "" || rev == before.Labels[v1.VirtualMachinePoolRevisionName] {
		t.Errorf("VMI revision label %q, was %q: want a new revision", rev, before.Labels[v1.VirtualMachinePoolRevisionName])
	}
}
