// Package v1 holds the Go types of the kubevirt.io/v1 API as nodevirt serves it:
// VirtualMachine, VirtualMachineInstance and VirtualMachineInstanceMigration.
//
// JSON field names are KubeVirt's, so manifests written for KubeVirt decode
// unchanged. A field nodevirt does not implement is absent here on purpose: the
// CRD schema generated from these types leaves it out, and the API server's
// strict field validation rejects a manifest that sets it, naming the field.
//
// Validation happens at admission without a webhook: OpenAPI constraints and
// CEL rules (x-kubernetes-validations) are declared with kubebuilder markers on
// the types below and rendered into deploy/crds by controller-gen. The same
// schema is served as v1 (storage) and v1alpha3.
//
// Ownership of status fields (see DESIGN.md): the cluster controller writes VM
// status and the VMI phase up to Scheduled, status.nodeName and the
// kubevirt.io/nodeName label; the node agent writes everything from Scheduled
// on. Phase changes go through [VirtualMachineInstancePhase.CanTransitionTo].
//
// Deep copy functions, the typed clientset, listers and informers are generated
// (zz_generated.deepcopy.go, cluster/client); run `make generate` after editing.
//
// +k8s:deepcopy-gen=package
// +groupName=kubevirt.io
package v1
