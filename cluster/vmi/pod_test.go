package vmi

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func baseVMI(mods ...func(*v1.VirtualMachineInstance)) *v1.VirtualMachineInstance {
	mem := resource.MustParse("128Mi")
	vmi := &v1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "testvm", UID: "1234-uid", Labels: map[string]string{"app": "web"}},
		Spec:       v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{Memory: &v1.Memory{Guest: &mem}}},
	}
	for _, m := range mods {
		m(vmi)
	}
	return vmi
}

// containerDiskVMI has a containerDisk, cloud-init and a masquerade NIC.
func containerDiskVMI() *v1.VirtualMachineInstance {
	return baseVMI(func(vmi *v1.VirtualMachineInstance) {
		vmi.Spec.Domain.CPU = &v1.CPU{Cores: 2}
		vmi.Spec.Domain.Devices.Disks = []v1.Disk{{Name: "root"}, {Name: "ci"}}
		vmi.Spec.Domain.Devices.Interfaces = []v1.Interface{{Name: "default", Masquerade: &v1.InterfaceMasquerade{}}}
		vmi.Spec.Networks = []v1.Network{{Name: "default", Pod: &v1.PodNetwork{}}}
		vmi.Spec.Volumes = []v1.Volume{
			{Name: "root", ContainerDisk: &v1.ContainerDiskSource{Image: "example/disk:1", ImagePullPolicy: corev1.PullIfNotPresent}},
			{Name: "ci", CloudInitNoCloud: &v1.CloudInitNoCloudSource{SecretRef: &corev1.LocalObjectReference{Name: "userdata"}}},
		}
		vmi.Spec.TerminationGracePeriodSeconds = ptr.To[int64](5)
		vmi.Spec.NodeSelector = map[string]string{"zone": "a"}
		vmi.Spec.Tolerations = []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists}}
		vmi.Spec.PriorityClassName = "non-preemptible"
	})
}

// kernelBootVMI boots a kernel and initrd from a kernelBoot image.
func kernelBootVMI() *v1.VirtualMachineInstance {
	return baseVMI(func(vmi *v1.VirtualMachineInstance) {
		vmi.Spec.Domain.Firmware = &v1.Firmware{KernelBoot: &v1.KernelBoot{KernelArgs: "console=ttyS0",
			Container: &v1.KernelBootContainer{Image: "example/kernel:1", KernelPath: "/boot/vmlinux", InitrdPath: "/boot/initrd.img"}}}
		f := false
		vmi.Spec.Domain.Devices.AutoattachPodInterface = &f
		vmi.Spec.Domain.Devices.AutoattachGraphicsDevice = &f
	})
}

func TestRenderPod_Golden(t *testing.T) {
	emu := PodConfig{LauncherImage: "nodevirt.local/nodevirt-launcher:dev", Emulation: true}
	kvm := PodConfig{LauncherImage: "registry.example/nodevirt-launcher:v1"}
	imgVols := emu
	imgVols.Shape = ShapeImageVolumes
	tests := []struct {
		name  string
		vmi   *v1.VirtualMachineInstance
		cfg   PodConfig
		modes VolumeModes
	}{
		{"minimal-emulation", baseVMI(), emu, nil},
		{"minimal-kvm", baseVMI(), kvm, nil},
		{"containerdisk-cloudinit-masquerade", containerDiskVMI(), emu, nil},
		{"kernelboot", kernelBootVMI(), emu, nil},
		{"imagevolumes-containerdisk-cloudinit-masquerade", containerDiskVMI(), imgVols, nil},
		{"imagevolumes-kernelboot", kernelBootVMI(), imgVols, nil},
		{"pvc-filesystem-and-block", baseVMI(func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Domain.Devices.Disks = []v1.Disk{{Name: "data"}, {Name: "raw"}}
			vmi.Spec.Volumes = []v1.Volume{
				{Name: "data", PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "fs-claim"}},
				{Name: "raw", PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "block-claim", ReadOnly: true}},
			}
		}), kvm, VolumeModes{"fs-claim": corev1.PersistentVolumeFilesystem, "block-claim": corev1.PersistentVolumeBlock}},
		{"dedicated-cpus-isolated-emulator", dedicatedVMI(), emu, nil},
		{"imagevolumes-dedicated-cpus-isolated-emulator", dedicatedVMI(), imgVols, nil},
		{"resources-limits-overcommit", baseVMI(func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Domain.Memory = nil
			vmi.Spec.Domain.Resources = v1.ResourceRequirements{
				Requests:                corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi"), corev1.ResourceCPU: resource.MustParse("500m")},
				Limits:                  corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi"), corev1.ResourceCPU: resource.MustParse("2")},
				OvercommitGuestOverhead: true,
			}
		}), kvm, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.vmi.DeepCopy()
			pod, err := RenderPod(tc.vmi, tc.cfg, tc.modes)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(before, tc.vmi); diff != "" {
				t.Fatalf("RenderPod mutated the VMI:\n%s", diff)
			}
			got, err := yaml.Marshal(pod)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", tc.name+".yaml")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("pod differs from %s (-want +got):\n%s", path, diff)
			}
		})
	}
}

// dedicatedVMI is containerDiskVMI with two dedicated vCPUs and an
// isolated emulator thread.
func dedicatedVMI() *v1.VirtualMachineInstance {
	vmi := containerDiskVMI()
	vmi.Spec.Domain.CPU.DedicatedCPUPlacement = true
	vmi.Spec.Domain.CPU.IsolateEmulatorThread = true
	return vmi
}

// TestRenderPod_DedicatedCPUsGuaranteed checks what the static CPU manager
// needs to give a pod exclusive CPUs: Guaranteed QoS (every container,
// init containers too, with cpu and memory limits equal to requests) and a
// whole number of CPUs for the compute container.
func TestRenderPod_DedicatedCPUsGuaranteed(t *testing.T) {
	for _, shape := range []PodShape{ShapeContainers, ShapeImageVolumes} {
		pod, err := RenderPod(dedicatedVMI(), PodConfig{LauncherImage: "x", Emulation: true, Shape: shape}, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range append(pod.Spec.InitContainers, pod.Spec.Containers...) {
			for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				req, lim := c.Resources.Requests[r], c.Resources.Limits[r]
				if req.IsZero() || req.Cmp(lim) != 0 {
					t.Errorf("%s: container %s %s request %s, limit %s: not Guaranteed", shape, c.Name, r, req.String(), lim.String())
				}
			}
		}
		if got := pod.Spec.Containers[0].Resources.Requests.Cpu(); got.Value() != 3 || got.MilliValue() != 3000 {
			t.Errorf("%s: compute requests %s CPUs, want 3 (2 vCPUs + the emulator thread)", shape, got)
		}
		if pod.Spec.NodeSelector[v1.CPUManagerLabel] != "true" {
			t.Errorf("%s: node selector %v lacks %s=true", shape, pod.Spec.NodeSelector, v1.CPUManagerLabel)
		}
	}
}

func TestRenderPod_MissingPVC(t *testing.T) {
	vmi := baseVMI(func(vmi *v1.VirtualMachineInstance) {
		vmi.Spec.Volumes = []v1.Volume{{Name: "data", PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "nope"}}}
	})
	if _, err := RenderPod(vmi, PodConfig{LauncherImage: "x"}, nil); !errors.Is(err, ErrPVCNotFound) {
		t.Fatalf("err = %v, want ErrPVCNotFound", err)
	}
}

func TestOverhead(t *testing.T) {
	f := false
	tests := []struct {
		name      string
		vmi       *v1.VirtualMachineInstance
		emulation bool
		want      string
	}{
		// 10 launcher + 48 QEMU + 1 vCPU + 0.25 page tables + 2 NIC + 8 graphics = 69.25 → 70Mi
		{"default kvm", baseVMI(), false, "70Mi"},
		// + 64 TCG cache
		{"default tcg", baseVMI(), true, "134Mi"},
		// 10+48+4 vCPU+ 8 (4Gi/512) + 2×2 disks + 0 NIC, no graphics
		{"4 vcpus 4Gi 2 disks headless", baseVMI(func(vmi *v1.VirtualMachineInstance) {
			m := resource.MustParse("4Gi")
			vmi.Spec.Domain.Memory.Guest = &m
			vmi.Spec.Domain.CPU = &v1.CPU{Sockets: 2, Cores: 2}
			vmi.Spec.Domain.Devices.Disks = []v1.Disk{{Name: "a"}, {Name: "b"}}
			vmi.Spec.Domain.Devices.AutoattachPodInterface, vmi.Spec.Domain.Devices.AutoattachGraphicsDevice = &f, &f
		}), false, "74Mi"},
	}
	for _, tc := range tests {
		got := Overhead(&tc.vmi.Spec, tc.emulation)
		if want := resource.MustParse(tc.want); got.Cmp(want) != 0 {
			t.Errorf("%s: Overhead = %s, want %s", tc.name, got, tc.want)
		}
	}
}
