// Package v1beta1 holds the Go types of KubeVirt's snapshot.kubevirt.io API
// as nodevirt serves it: VirtualMachineSnapshot (a request to snapshot a
// VM), VirtualMachineSnapshotContent (what a snapshot captured: the VM's
// spec and one CSI VolumeSnapshot per PVC volume) and VirtualMachineRestore
// (a request to put a VM back as a snapshot captured it). cluster/snapshot
// is their controller.
//
// The JSON spellings are KubeVirt v1.6's, so KubeVirt's manifests and
// clients work unchanged; fields nodevirt cannot honour are refused at
// admission, naming the field.
//
// Deep copy functions, the typed clientset, listers and informers are
// generated (zz_generated.deepcopy.go, cluster/client); run `make generate`
// after editing.
//
// +k8s:deepcopy-gen=package
// +groupName=snapshot.kubevirt.io
package v1beta1
