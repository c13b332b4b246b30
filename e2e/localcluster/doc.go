// Package localcluster drives the local Kubernetes cluster of hack/cluster
// (the one `make cluster-up` starts) from Go tests: Up starts a cluster in a
// state directory of the caller's choosing and returns what tests need to
// talk to it (kubeconfig, nodes, their IPs, pod CIDRs, containerd sockets,
// kubelet root dirs); Load finds an already running one; Down stops it and
// restores the host.
//
// The shell scripts stay the single implementation; this package only runs
// them and parses the cluster.env file they write. Artifacts (Kubernetes
// binaries, image archives) are found under $NODEVIRT_OUT, falling back to
// <repo root>/_output.
//
// Only one local cluster can run on a host (kubelet cgroups, kube-proxy
// iptables chains and sysctls are host-wide). Tests that start or use one
// serialise on Lock, which works across test binaries (go test runs packages
// in parallel).
package localcluster
