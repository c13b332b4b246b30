// Package v1 holds the Go types of the kubevirt.io/v1 API as nodevirt serves it:
// VirtualMachine, VirtualMachineInstance, VirtualMachineInstanceMigration and
// VirtualMachineInstanceReplicaSet.
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
// Ownership of status fields (docs/status-ownership.md): [StatusOwnership] is
// the one table of who writes which status field, under which field manager;
// writers consult it ([PhaseWriter], [ConditionWriters],
// [VirtualMachineInstanceStatus.OwnedBy]) and write VMI status by
// server-side apply of their fields only ([StatusApply]). The cluster
// controller writes VM status and the VMI phase up to Scheduled,
// status.nodeName and the kubevirt.io/nodeName label; the node agent writes
// the phase from Scheduled on; the one exception is the node controller
// failing a VMI whose agent is silent (NodeUnresponsive). Phase changes go
// through [VirtualMachineInstancePhase.CanTransitionTo], and the API server
// enforces the same table with a CEL rule ([PhaseTransitionRule]).
//
// Deep copy functions, the typed clientset, listers and informers are generated
// (zz_generated.deepcopy.go, cluster/client); run `make generate` after editing.
//
// +k8s:deepcopy-gen=package
// +groupName=kubevirt.io
package v1
