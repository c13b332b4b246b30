package vmi

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	core "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

func TestClaimCapacity(t *testing.T) {
	req := corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}
	bound := corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")}
	for _, tt := range []struct {
		name string
		pvc  corev1.PersistentVolumeClaim
		want int64
		ok   bool
	}{
		{"unbound: the request", corev1.PersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{Resources: corev1.VolumeResourceRequirements{Requests: req}}}, 1 << 30, true},
		{"bound: the capacity", corev1.PersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{Resources: corev1.VolumeResourceRequirements{Requests: req}},
			Status: corev1.PersistentVolumeClaimStatus{Capacity: bound}}, 2 << 30, true},
		{"neither", corev1.PersistentVolumeClaim{}, 0, false},
	} {
		if got, ok := ClaimCapacity(&tt.pvc); got != tt.want || ok != tt.ok {
			t.Errorf("%s: ClaimCapacity = %d, %v; want %d, %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
}

// TestSync_PVCCapacitiesOnPod: the rendered pod records the filesystem-mode
// PVC volumes' capacities (by volume name) and mounts the block one as a
// device.
func TestSync_PVCCapacitiesOnPod(t *testing.T) {
	f := newFixture(t)
	f.addVMI(vmiIn("", func(v *v1.VirtualMachineInstance) {
		v.Spec.Volumes = []v1.Volume{
			{Name: "fs", PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "fs-claim"}},
			{Name: "blk", PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "blk-claim"}},
		}
	}))
	storage := func(q string) corev1.VolumeResourceRequirements {
		return corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(q)}}
	}
	_ = f.pvcs.Add(&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "fs-claim"},
		Spec: corev1.PersistentVolumeClaimSpec{Resources: storage("512Mi"), AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}}})
	_ = f.pvcs.Add(&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "blk-claim"},
		Spec: corev1.PersistentVolumeClaimSpec{Resources: storage("1Gi"), VolumeMode: ptr.To(corev1.PersistentVolumeBlock)}})
	if _, kube := f.sync("ns/testvm"); !cmp.Equal(kube, []string{"create pods"}) {
		t.Fatalf("kube actions = %v", kube)
	}
	pod := f.kube.Actions()[0].(core.CreateAction).GetObject().(*corev1.Pod)
	if got := pod.Annotations[v1.PVCCapacitiesAnnotation]; got != `{"fs":536870912}` {
		t.Errorf("annotation %s = %q", v1.PVCCapacitiesAnnotation, got)
	}
	if got := pod.Spec.Containers[0].VolumeDevices; len(got) != 1 || got[0].DevicePath != BlockDevDir+"/blk" {
		t.Errorf("volumeDevices = %+v", got)
	}

	// The status records each claim as the pod was made from it.
	want := []v1.VolumeStatus{
		{Name: "fs", PersistentVolumeClaimInfo: &v1.PersistentVolumeClaimInfo{ClaimName: "fs-claim",
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			VolumeMode:  ptr.To(corev1.PersistentVolumeFilesystem), Requests: storage("512Mi").Requests}},
		{Name: "blk", PersistentVolumeClaimInfo: &v1.PersistentVolumeClaimInfo{ClaimName: "blk-claim",
			VolumeMode: ptr.To(corev1.PersistentVolumeBlock), Requests: storage("1Gi").Requests}},
	}
	got := f.written().Status.VolumeStatus
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("status.volumeStatus (-want +got):\n%s", diff)
	}
	if !got[0].PersistentVolumeClaimInfo.Shared() || got[1].PersistentVolumeClaimInfo.Shared() {
		t.Errorf("Shared: fs %v, blk %v; want true, false", got[0].PersistentVolumeClaimInfo.Shared(), got[1].PersistentVolumeClaimInfo.Shared())
	}

	// A migration's target pod keeps the source's capacities.
	target, err := RenderTargetPod(f.written(), PodConfig{LauncherImage: "x"}, ModesOfPod(pod), TargetOptions{Name: "t", Source: pod})
	if err != nil {
		t.Fatal(err)
	}
	if got := target.Annotations[v1.PVCCapacitiesAnnotation]; got != `{"fs":536870912}` {
		t.Errorf("target pod annotation = %q", got)
	}
}
