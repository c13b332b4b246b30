package vmi

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

func TestRenderTargetPod(t *testing.T) {
	vmi := baseVMI(func(vmi *v1.VirtualMachineInstance) {
		vmi.Spec.NodeSelector = map[string]string{"zone": "a"}
		vmi.Spec.Domain.Firmware = &v1.Firmware{KernelBoot: &v1.KernelBoot{
			Container: &v1.KernelBootContainer{Image: "example.io/kernel:1", KernelPath: "/boot/vmlinux"}}}
		vmi.Spec.Volumes = []v1.Volume{
			{Name: "root", ContainerDisk: &v1.ContainerDiskSource{Image: "registry:5000/disk:latest"}},
			{Name: "data", PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}},
		}
	})
	cfg := PodConfig{LauncherImage: "launcher:dev", Emulation: true}
	source, err := RenderPod(vmi, cfg, VolumeModes{"data": corev1.PersistentVolumeBlock})
	if err != nil {
		t.Fatal(err)
	}
	source.Spec.NodeName = "a"
	source.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "kernel-boot", ImageID: "example.io/kernel@sha256:kkk"}}
	source.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "volumeroot", ImageID: "docker-pullable://registry:5000/disk@sha256:ddd"}}

	pod, err := RenderTargetPod(vmi, cfg, ModesOfPod(source), TargetOptions{MigrationUID: "mig", Name: "virt-launcher-testvm-mig-abc",
		Source: source, AddedNodeSelector: map[string]string{"zone": "b", "rack": "r1"}})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Name != "virt-launcher-testvm-mig-abc" || pod.GenerateName != "" {
		t.Errorf("name = %q generateName = %q", pod.Name, pod.GenerateName)
	}
	if pod.Labels[v1.MigrationJobUIDLabel] != "mig" || pod.Labels[v1.CreatedByLabel] != "1234-uid" {
		t.Errorf("labels = %v", pod.Labels)
	}
	// The VMI's own selector wins; added keys are merged.
	if diff := cmp.Diff(map[string]string{"zone": "a", "rack": "r1", v1.SchedulableLabel: "true"}, pod.Spec.NodeSelector); diff != "" {
		t.Errorf("node selector (-want +got):\n%s", diff)
	}
	want := []corev1.PodAffinityTerm{{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{v1.CreatedByLabel: "1234-uid"}},
		TopologyKey: corev1.LabelHostname}}
	if diff := cmp.Diff(want, pod.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution); diff != "" {
		t.Errorf("anti-affinity (-want +got):\n%s", diff)
	}
	images := map[string]string{}
	for _, c := range append(pod.Spec.InitContainers, pod.Spec.Containers...) {
		images[c.Name] = c.Image
	}
	if diff := cmp.Diff(map[string]string{"nodevirt-bin-init": "launcher:dev", "kernel-boot": "example.io/kernel@sha256:kkk",
		"compute": "launcher:dev", "volumeroot": "registry:5000/disk@sha256:ddd"}, images); diff != "" {
		t.Errorf("images (-want +got):\n%s", diff)
	}
	if len(pod.Spec.Containers[0].VolumeDevices) != 1 {
		t.Errorf("the block PVC is not a device in the target: %+v", pod.Spec.Containers[0].VolumeDevices)
	}
	// The source pod is untouched.
	if source.Spec.Affinity != nil || source.Labels[v1.MigrationJobUIDLabel] != "" {
		t.Error("rendering the target changed the source pod")
	}

	// An image known by its ID only (imported, no repo digest) keeps its
	// reference.
	source.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "volumeroot", ImageID: "sha256:0123"}}
	pod, err = RenderTargetPod(vmi, cfg, ModesOfPod(source), TargetOptions{Source: source})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range pod.Spec.Containers {
		if c.Name == "volumeroot" && c.Image != "registry:5000/disk:latest" {
			t.Errorf("image known by its ID only: %q, want the reference unchanged", c.Image)
		}
	}

	source.Status.ContainerStatuses = nil
	if _, err := RenderTargetPod(vmi, cfg, ModesOfPod(source), TargetOptions{Source: source}); err == nil {
		t.Error("no error without the source's image ID")
	}
}

func TestImageRepository(t *testing.T) {
	for in, want := range map[string]string{
		"disk":                         "disk",
		"disk:1":                       "disk",
		"registry:5000/disk":           "registry:5000/disk",
		"registry:5000/disk:1":         "registry:5000/disk",
		"registry:5000/disk@sha256:aa": "registry:5000/disk",
	} {
		if got := imageRepository(in); got != want {
			t.Errorf("imageRepository(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCurrentPod(t *testing.T) {
	vmi := baseVMI()
	p := func(name, node string, mig bool, phase corev1.PodPhase) *corev1.Pod {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1.CreatedByLabel: "1234-uid"}},
			Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: phase}}
		if mig {
			pod.Labels[v1.MigrationJobUIDLabel] = "m"
		}
		return pod
	}
	source, target := p("source", "a", false, corev1.PodRunning), p("target", "b", true, corev1.PodRunning)
	other := p("other", "a", false, corev1.PodRunning)
	other.Labels[v1.CreatedByLabel] = "old-uid"
	tests := []struct {
		name string
		node string
		pods []*corev1.Pod
		want string
	}{
		{"no node yet: the non-target pod", "", []*corev1.Pod{p("new", "", false, corev1.PodPending)}, "new"},
		{"migrating: the pod on the VMI's node", "a", []*corev1.Pod{target, source}, "source"},
		{"after handoff: the target", "b", []*corev1.Pod{source, target}, "target"},
		{"another VMI's pod is never it", "a", []*corev1.Pod{other}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := vmi.DeepCopy()
			v.Status.NodeName = tc.node
			got := CurrentPod(tc.pods, v)
			name := ""
			if got != nil {
				name = got.Name
			}
			if name != tc.want {
				t.Errorf("CurrentPod = %q, want %q", name, tc.want)
			}
		})
	}
}

func TestRenderTargetPod_ImageVolumes(t *testing.T) {
	vmi := baseVMI(func(vmi *v1.VirtualMachineInstance) {
		vmi.Spec.Domain.Firmware = &v1.Firmware{KernelBoot: &v1.KernelBoot{
			Container: &v1.KernelBootContainer{Image: "example.io/kernel:1", KernelPath: "/boot/vmlinux"}}}
		vmi.Spec.Volumes = []v1.Volume{{Name: "root", ContainerDisk: &v1.ContainerDiskSource{Image: "registry:5000/disk:latest"}}}
	})
	containers := PodConfig{LauncherImage: "launcher:dev", Emulation: true}
	imageVols := containers
	imageVols.Shape = ShapeImageVolumes
	volumeImages := func(pod *corev1.Pod) map[string]string {
		out := map[string]string{}
		for _, v := range pod.Spec.Volumes {
			if v.Image != nil {
				out[v.Name] = v.Image.Reference
			}
		}
		return out
	}
	tests := []struct {
		name   string
		source PodConfig
		want   map[string]string
	}{
		// A source of the fallback shape reports the digests its holder
		// and kernel-boot containers run: the target's volumes take them.
		{"FromContainers", containers, map[string]string{
			"root-image": "registry:5000/disk@sha256:ddd", "kernel-boot": "example.io/kernel@sha256:kkk"}},
		// A source of image volumes reports none: the references stay.
		{"FromImageVolumes", imageVols, map[string]string{
			"root-image": "registry:5000/disk:latest", "kernel-boot": "example.io/kernel:1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			source, err := RenderPod(vmi, tt.source, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tt.source.Shape != ShapeImageVolumes {
				source.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "kernel-boot", ImageID: "example.io/kernel@sha256:kkk"}}
				source.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "volumeroot", ImageID: "docker-pullable://registry:5000/disk@sha256:ddd"}}
			}
			pod, err := RenderTargetPod(vmi, imageVols, nil, TargetOptions{MigrationUID: "mig", Name: "t", Source: source})
			if err != nil {
				t.Fatal(err)
			}
			if len(pod.Spec.Containers) != 1 || len(pod.Spec.InitContainers) != 0 {
				t.Errorf("target has %d containers and %d init containers, want 1 and 0", len(pod.Spec.Containers), len(pod.Spec.InitContainers))
			}
			if diff := cmp.Diff(tt.want, volumeImages(pod)); diff != "" {
				t.Errorf("image volumes (-want +got):\n%s", diff)
			}
		})
	}
}
