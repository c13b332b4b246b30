package vmi

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// PVCCapacities maps the names of a VMI's filesystem-mode PVC volumes to
// their claims' capacities in bytes.
type PVCCapacities map[string]int64

// ClaimCapacity is a claim's capacity: the bound volume's
// (status.capacity), or before binding (WaitForFirstConsumer) the request.
// ok is false when the claim states neither.
func ClaimCapacity(pvc *corev1.PersistentVolumeClaim) (bytes int64, ok bool) {
	if q, set := pvc.Status.Capacity[corev1.ResourceStorage]; set && q.Value() > 0 {
		return q.Value(), true
	}
	if q, set := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; set && q.Value() > 0 {
		return q.Value(), true
	}
	return 0, false
}

// AnnotatePVCCapacities records caps on a rendered launcher pod
// (v1.PVCCapacitiesAnnotation), for the node agent. Nothing is written
// when caps is empty. It is pure.
func AnnotatePVCCapacities(pod *corev1.Pod, caps PVCCapacities) error {
	if len(caps) == 0 {
		return nil
	}
	b, err := json.Marshal(caps)
	if err != nil {
		return fmt.Errorf("encode pvc capacities: %w", err)
	}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[v1.PVCCapacitiesAnnotation] = string(b)
	return nil
}

// ClaimStatus is the status.volumeStatus entry of the PVC volume named
// volume, whose claim is pvc: its access modes (the bound volume's when
// bound, else the claim's request), volume mode and sizes. It is pure.
func ClaimStatus(volume string, pvc *corev1.PersistentVolumeClaim) v1.VolumeStatus {
	modes := pvc.Status.AccessModes
	if len(modes) == 0 {
		modes = pvc.Spec.AccessModes
	}
	mode := corev1.PersistentVolumeFilesystem
	if pvc.Spec.VolumeMode != nil {
		mode = *pvc.Spec.VolumeMode
	}
	return v1.VolumeStatus{
		Name: volume,
		PersistentVolumeClaimInfo: &v1.PersistentVolumeClaimInfo{
			ClaimName:   pvc.Name,
			AccessModes: append([]corev1.PersistentVolumeAccessMode(nil), modes...),
			VolumeMode:  ptr.To(mode),
			Capacity:    pvc.Status.Capacity.DeepCopy(),
			Requests:    pvc.Spec.Resources.Requests.DeepCopy(),
		},
	}
}
