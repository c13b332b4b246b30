# The local cluster's CSI storage: the driver hack/csihostpath and the
# Kubernetes CSI sidecars (hack/build-csi.sh, part of cluster-binaries),
# installed on a running cluster by hack/cluster/csi.sh.

.PHONY: test-csi cluster-csi

test-csi: ## Run the CSI driver's tests (root: real bind mounts and loop devices).
	$(GO) test $(GOTEST_FLAGS) -v ./hack/csihostpath/

cluster-csi: cluster-binaries images ## Install the CSI storage (class nodevirt-csi, snapshots) on the running local cluster.
	hack/cluster/csi.sh
