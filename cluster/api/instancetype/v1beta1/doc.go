// Package v1beta1 holds the Go types of KubeVirt's instancetype.kubevirt.io
// API as nodevirt serves it: VirtualMachineInstancetype and
// VirtualMachinePreference (namespaced) and their cluster-scoped twins
// VirtualMachineClusterInstancetype and VirtualMachineClusterPreference.
// A VirtualMachine names one of each in spec.instancetype and
// spec.preference; cluster/instancetype captures them in ControllerRevisions
// and expands them into the VMI the VM creates.
//
// The schema keeps KubeVirt's spellings. Instancetype fields nodevirt cannot
// honour (NUMA, hugepages, GPUs, host devices, I/O threads,
// launch security, memory hotplug) are left out, so `kubectl apply` fails
// naming them. Preferences are soft by definition: a TPM preference (no
// vTPM in nodevirt) is accepted and not applied, and the VM controller says
// so in an event.
//
// Deep copy functions, the typed clientset, listers and informers are
// generated (zz_generated.deepcopy.go, cluster/client); run `make generate`
// after editing.
//
// +k8s:deepcopy-gen=package
// +groupName=instancetype.kubevirt.io
package v1beta1
