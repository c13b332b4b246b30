// Package v1alpha1 holds the Go types of KubeVirt's pool.kubevirt.io API as
// nodevirt serves it: VirtualMachinePool, which keeps spec.replicas
// VirtualMachines created from one template, named <pool>-<index>.
// cluster/pool is its controller.
//
// The fields are KubeVirt v1.6's; cluster/pool implements each of them.
//
// Deep copy functions, the typed clientset, listers and informers are
// generated (zz_generated.deepcopy.go, cluster/client); run `make generate`
// after editing.
//
// +k8s:deepcopy-gen=package
// +groupName=pool.kubevirt.io
package v1alpha1
