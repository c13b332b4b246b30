// Package operator is the end-to-end test of nodevirt-operator on the local
// cluster: it takes over the installation hack/deploy-local.sh made (the
// local differences expressed as the KubeVirt resource's
// customizeComponents), upgrades it to a second locally built tag with a VM
// running and nothing disturbed, and refuses to uninstall while the VM
// exists. Run it with `go test ./e2e/operator/` (root, a local cluster:
// see e2e/localcluster).
package operator
