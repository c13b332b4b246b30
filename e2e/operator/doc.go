// Package operator is the end-to-end test of nodevirt-operator on the local
// cluster, installed as hack/deploy-local.sh installs it (the operator,
// then a KubeVirt resource whose customizeComponents carry the local
// differences): it upgrades the installation to a second locally built tag
// with a VM running and nothing disturbed, refuses to uninstall while the
// VM exists, removes everything but the CRDs once it is gone, and installs
// again with the two applies. Run it with `go test ./e2e/operator/` (root,
// a local cluster: see e2e/localcluster).
package operator
