package v1

import corev1 "k8s.io/api/core/v1"

// VolumeStatus is what the cluster knows of one of a VMI's volumes
// (KubeVirt's status.volumeStatus entry). nodevirt's controller writes the
// entries of PVC volumes when it creates the launcher pod: the claim's
// access modes, volume mode and size, which the node agent reads to tell
// shared (ReadWriteMany) disks from node-local ones.
type VolumeStatus struct {
	// Name is the volume's name in spec.volumes: the key of the list.
	// +required
	Name string `json:"name"`
	// PersistentVolumeClaimInfo describes the claim of a PVC volume.
	// +optional
	PersistentVolumeClaimInfo *PersistentVolumeClaimInfo `json:"persistentVolumeClaimInfo,omitempty"`
}

// PersistentVolumeClaimInfo is a claim's state as the launcher pod was
// made from it (KubeVirt's spelling).
type PersistentVolumeClaimInfo struct {
	// +optional
	ClaimName string `json:"claimName,omitempty"`
	// AccessModes are the claim's (spec.accessModes; status.accessModes
	// once bound).
	// +optional
	// +listType=atomic
	AccessModes []corev1.PersistentVolumeAccessMode `json:"accessModes,omitempty"`
	// +optional
	VolumeMode *corev1.PersistentVolumeMode `json:"volumeMode,omitempty"`
	// Capacity is the bound volume's (status.capacity).
	// +optional
	Capacity corev1.ResourceList `json:"capacity,omitempty"`
	// Requests are the claim's (spec.resources.requests).
	// +optional
	Requests corev1.ResourceList `json:"requests,omitempty"`
}

// Shared reports whether the claim may be used from several nodes at
// once (ReadWriteMany): what a live migration needs of a PVC disk.
func (i *PersistentVolumeClaimInfo) Shared() bool {
	if i == nil {
		return false
	}
	for _, m := range i.AccessModes {
		if m == corev1.ReadWriteMany {
			return true
		}
	}
	return false
}
