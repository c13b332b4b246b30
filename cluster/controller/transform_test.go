package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

func TestTrimPod(t *testing.T) {
	c := corev1.Container{
		Name: "compute", Image: "launcher:1",
		Command: []string{"/launcher"}, Args: []string{"--x"}, Env: []corev1.EnvVar{{Name: "A", Value: "b"}},
		VolumeMounts:  []corev1.VolumeMount{{Name: "v", MountPath: "/v"}},
		VolumeDevices: []corev1.VolumeDevice{{Name: "d", DevicePath: "/dev/d"}},
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi"), v1.KVMResource: resource.MustParse("1")},
		},
		ReadinessProbe: &corev1.Probe{}, SecurityContext: &corev1.SecurityContext{},
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{"l": "v"}, Annotations: map[string]string{"a": "v"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}},
		Spec: corev1.PodSpec{
			NodeName: "n", NodeSelector: map[string]string{"k": "v"}, Affinity: &corev1.Affinity{},
			InitContainers: []corev1.Container{c}, Containers: []corev1.Container{c},
			Volumes: []corev1.Volume{{Name: "v"}, {Name: "claim", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}}},
			Tolerations: []corev1.Toleration{{Key: "t"}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "compute", ImageID: "sha256:x"}}},
	}
	obj, err := trimPod(pod)
	if err != nil {
		t.Fatal(err)
	}
	got := obj.(*corev1.Pod)
	if got.ManagedFields != nil || got.Spec.Tolerations != nil {
		t.Errorf("managed fields or tolerations kept: %+v", got.ObjectMeta)
	}
	for _, k := range []corev1.Container{got.Spec.InitContainers[0], got.Spec.Containers[0]} {
		if k.Command != nil || k.Args != nil || k.Env != nil || k.VolumeMounts != nil || k.ReadinessProbe != nil || k.SecurityContext != nil {
			t.Errorf("container fields kept: %+v", k)
		}
		if k.Resources.Requests != nil || len(k.Resources.Limits) != 1 {
			t.Errorf("resources kept beyond the /dev/kvm limit: %+v", k.Resources)
		}
		if k.Name != "compute" || k.Image != "launcher:1" || len(k.VolumeDevices) != 1 || !v1.RequestsKVM(got) {
			t.Errorf("container fields the controllers read were dropped: %+v", k)
		}
	}
	if got.Spec.NodeName != "n" || got.Spec.NodeSelector["k"] != "v" || got.Spec.Affinity == nil || len(got.Spec.Volumes) != 1 || got.Spec.Volumes[0].Name != "claim" ||
		got.Labels["l"] != "v" || got.Annotations["a"] != "v" || got.Status.ContainerStatuses[0].ImageID != "sha256:x" {
		t.Errorf("fields the controllers read were dropped: %+v", got)
	}
	if _, err := trimPod(&corev1.ConfigMap{}); err != nil {
		t.Errorf("a non-pod: %v", err)
	}
}
