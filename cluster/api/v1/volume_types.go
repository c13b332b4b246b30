package v1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Volume is a named storage source; a disk of the same name attaches it.
//
// +kubebuilder:validation:XValidation:rule="!has(self.dataVolume)",message="dataVolume needs CDI (the Containerized Data Importer), which nodevirt does not provide: create a PersistentVolumeClaim and attach it with volumes[].persistentVolumeClaim"
// +kubebuilder:validation:XValidation:rule="!has(self.hostDisk)",message="hostDisk is not supported: it would give the VM a path on the node; attach a persistentVolumeClaim instead"
// +kubebuilder:validation:XValidation:rule="(has(self.containerDisk) ? 1 : 0) + (has(self.cloudInitNoCloud) ? 1 : 0) + (has(self.emptyDisk) ? 1 : 0) + (has(self.persistentVolumeClaim) ? 1 : 0) == 1",message="exactly one volume source (containerDisk, cloudInitNoCloud, emptyDisk or persistentVolumeClaim) must be set"
type Volume struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`
	// +optional
	ContainerDisk *ContainerDiskSource `json:"containerDisk,omitempty"`
	// +optional
	CloudInitNoCloud *CloudInitNoCloudSource `json:"cloudInitNoCloud,omitempty"`
	// +optional
	EmptyDisk *EmptyDiskSource `json:"emptyDisk,omitempty"`
	// +optional
	PersistentVolumeClaim *PersistentVolumeClaimVolumeSource `json:"persistentVolumeClaim,omitempty"`
	// DataVolume is refused: it needs CDI.
	// +optional
	DataVolume *Unsupported `json:"dataVolume,omitempty"`
	// HostDisk is refused: nodevirt never gives a VM a node path.
	// +optional
	HostDisk *Unsupported `json:"hostDisk,omitempty"`
}

// ContainerDiskSource is a disk image shipped in a container image. The
// guest writes to a copy-on-write overlay that is discarded with the VMI.
type ContainerDiskSource struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Image string `json:"image"`
	// +optional
	// +kubebuilder:validation:MaxLength=253
	ImagePullSecret string `json:"imagePullSecret,omitempty"`
	// Path is the disk image inside the container image; by default the one
	// file under /disk.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^/[^\x00]*$`
	Path string `json:"path,omitempty"`
	// +optional
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`
}

// CloudInitNoCloudSource is cloud-init data served to the guest as a NoCloud
// ISO labelled cidata.
//
// +kubebuilder:validation:XValidation:rule="(has(self.userData) ? 1 : 0) + (has(self.userDataBase64) ? 1 : 0) + (has(self.secretRef) ? 1 : 0) <= 1",message="at most one of userData, userDataBase64 or secretRef may be set"
// +kubebuilder:validation:XValidation:rule="(has(self.networkData) ? 1 : 0) + (has(self.networkDataBase64) ? 1 : 0) + (has(self.networkDataSecretRef) ? 1 : 0) <= 1",message="at most one of networkData, networkDataBase64 or networkDataSecretRef may be set"
// +kubebuilder:validation:XValidation:rule="has(self.userData) || has(self.userDataBase64) || has(self.secretRef) || has(self.networkData) || has(self.networkDataBase64) || has(self.networkDataSecretRef)",message="one of userData, userDataBase64, secretRef, networkData, networkDataBase64 or networkDataSecretRef must be set"
type CloudInitNoCloudSource struct {
	// SecretRef names a Secret whose userdata (or userData) key holds the user data.
	// +optional
	SecretRef *corev1.LocalObjectReference `json:"secretRef,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=262144
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9+/]*={0,2}$`
	UserDataBase64 string `json:"userDataBase64,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=196608
	UserData string `json:"userData,omitempty"`
	// NetworkDataSecretRef names a Secret whose networkdata (or networkData) key holds the network data.
	// +optional
	NetworkDataSecretRef *corev1.LocalObjectReference `json:"networkDataSecretRef,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=262144
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9+/]*={0,2}$`
	NetworkDataBase64 string `json:"networkDataBase64,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=196608
	NetworkData string `json:"networkData,omitempty"`
}

// EmptyDiskSource is a blank, sparse disk that lives as long as the VMI.
type EmptyDiskSource struct {
	Capacity resource.Quantity `json:"capacity"`
}

// PersistentVolumeClaimVolumeSource attaches a PVC (filesystem or block).
type PersistentVolumeClaimVolumeSource struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	ClaimName string `json:"claimName"`
	// +optional
	ReadOnly bool `json:"readOnly,omitempty"`
}
