package vmi

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/utils/ptr"
)

// ProbeImageVolumes asks the API server, with a server-side dry run of a
// pod in namespace, whether it keeps image volumes: with its ImageVolume
// gate off it drops the field (the pod is then invalid: a volume without a
// source), and a launcher pod rendered with
// image volumes would start without its disks. image is any image
// reference (nothing is pulled).
func ProbeImageVolumes(ctx context.Context, pods corev1client.PodsGetter, namespace, image string) (bool, error) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "nodevirt-image-volume-probe-"},
		Spec: corev1.PodSpec{
			RestartPolicy:                corev1.RestartPolicyNever,
			AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{
				Name: "probe", Image: image,
				VolumeMounts: []corev1.VolumeMount{{Name: "probe", MountPath: "/probe", ReadOnly: true}},
			}},
			Volumes: []corev1.Volume{{Name: "probe", VolumeSource: corev1.VolumeSource{
				Image: &corev1.ImageVolumeSource{Reference: image, PullPolicy: corev1.PullIfNotPresent},
			}}},
		},
	}
	got, err := pods.Pods(namespace).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if apierrors.IsInvalid(err) {
		return false, nil // the field was dropped, leaving a volume without a source
	}
	if err != nil {
		return false, fmt.Errorf("probe image volumes with a dry-run pod in %s: %w", namespace, err)
	}
	for _, v := range got.Spec.Volumes {
		if v.Name == "probe" && v.Image != nil {
			return true, nil
		}
	}
	return false, nil
}
