# Local Kubernetes cluster (hack/cluster/): the proving ground of every
# end-to-end claim. Configuration by environment, see hack/cluster/lib.sh
# (NODES=2 for two nodes, CLUSTER_DIR for another state directory,
# IMAGE_VOLUMES=false for a cluster without the ImageVolume gate).

CLUSTER_PACKAGES := runc containernetworking-plugins iptables nftables openssl curl bc iproute2 util-linux
K8S_COMPONENTS := kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl etcd

.PHONY: cluster-packages cluster-binaries cluster-up cluster-down test-cluster

cluster-packages: ## Install the Debian packages the local cluster needs (containerd, runc, CNI, iptables).
	hack/apt-install.sh $(CLUSTER_PACKAGES)

cluster-binaries: ## Build Kubernetes v1.34.4 (5 components + kubectl) and etcd into _output/k8s/bin, containerd v2.1.4 into _output/containerd/bin, the CSI sidecars into _output/csi/bin (cached).
	hack/build-k8s.sh $(K8S_COMPONENTS)
	hack/build-containerd.sh
	hack/build-csi.sh

cluster-up: cluster-packages cluster-binaries images ## Start the local cluster (NODES=2: two nodes); writes .cluster/kubeconfig.
	hack/cluster/up.sh

cluster-down: ## Stop the local cluster and restore the host (PURGE=1 also deletes .cluster/).
	hack/cluster/down.sh

test-cluster: cluster-packages cluster-binaries images ## Run the local cluster tests (up, pods, API, down, nothing left).
	$(GO) test $(GOTEST_FLAGS) -v ./e2e/localcluster/...

TEST_PREREQS += cluster-packages cluster-binaries images test-images
