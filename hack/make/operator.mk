# The operator (cluster/operator, cmd/nodevirt-operator): installs,
# upgrades and removes the components for the KubeVirt resource. Its
# manifests are deploy/<component> rendered by hack/manifests; its
# integration test runs it as a process against the real kube-apiserver of
# `make testenv`.

.PHONY: operator-manifests test-operator

operator-manifests: ## Render the operator's component manifests into $(OUT)/manifests.
	$(GO) run ./hack/manifests -deploy deploy -out $(OUT)/manifests

test-operator: testenv ## Run the operator's unit and integration tests (real kube-apiserver, operator as a process).
	$(GO) test $(GOTEST_FLAGS) ./cluster/operator/... ./cluster/leader/... ./hack/manifests/... ./cmd/nodevirt-operator/...
