// Package v1alpha1 holds the Go types of KubeVirt's migrations.kubevirt.io
// API as nodevirt serves it: MigrationPolicy, a cluster-scoped object that
// selects VMIs (by their labels and their namespace's labels) and overrides
// the cluster's migration options for them. cluster/migration resolves the
// policy of a VMI with KubeVirt's precedence rule (the policy matching the
// most labels wins) when it fixes a migration's configuration.
//
// Deep copy functions, the typed clientset, listers and informers are
// generated (zz_generated.deepcopy.go, cluster/client); run `make generate`
// after editing.
//
// +k8s:deepcopy-gen=package
// +groupName=migrations.kubevirt.io
package v1alpha1
