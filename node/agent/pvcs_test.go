package agent

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

func TestPVCsOfPod(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{v1.PVCCapacitiesAnnotation: `{"fs":1073741824}`}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "compute",
			VolumeDevices: []corev1.VolumeDevice{
				{Name: "blk-pvc", DevicePath: "/dev/nodevirt/blk"},
				{Name: "other", DevicePath: "/dev/elsewhere/x"},
			},
		}}},
	}
	got, err := pvcsOfPod(pod)
	if err != nil {
		t.Fatal(err)
	}
	want := podPVCs{block: map[string]bool{"blk": true}, capacities: map[string]int64{"fs": 1 << 30}}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(podPVCs{})); diff != "" {
		t.Errorf("pvcsOfPod (-want +got):\n%s", diff)
	}
	if got, err := pvcsOfPod(nil); err != nil || got.block != nil || got.capacities != nil {
		t.Errorf("pvcsOfPod(nil) = %+v, %v", got, err)
	}
	pod.Annotations[v1.PVCCapacitiesAnnotation] = "not json"
	if _, err := pvcsOfPod(pod); err == nil {
		t.Errorf("malformed annotation: no error")
	}
}
