# Per-node Prometheus metrics (node/metrics, the agent's /metrics). Unit
# tests use fresh registries and fake sources; the integration tests run in
# the agent's harness (real kube-apiserver, agent, launcher, QEMU under
# TCG; root) with a real Prometheus server; test-metrics-cluster has a real
# Prometheus scrape the agents of the local cluster.

.PHONY: metrics-deps test-metrics test-metrics-cluster bench-metrics

metrics-deps: ## Install the Prometheus server the metrics scrape test runs (Debian package prometheus).
	hack/apt-install.sh prometheus

test-metrics: testenv guest-images agent-deps metrics-deps ## Run the metrics tests (collector unit tests; agent /metrics with a real guest; a real Prometheus scrape).
	$(GO) test $(GOTEST_FLAGS) ./node/metrics/...
	$(GO) test $(GOTEST_FLAGS) -timeout 20m -run 'TestMetrics_Integration|TestDiskName|TestTapsOf' -v ./node/agent/

test-metrics-cluster: cluster-packages cluster-binaries images metrics-deps ## Run only the in-cluster Prometheus scrape (acceptance extra check, issue 10; reuses a running cluster).
	$(GO) test $(GOTEST_FLAGS) -v -timeout 40m -run 'TestAcceptance/issue10_' ./e2e/acceptance/

bench-metrics: testenv guest-images agent-deps ## Measure /metrics scrape time with 1 and 20 VMs (real agent and QEMU; paused VMs).
	NODEVIRT_BENCH=1 $(GO) test $(GOTEST_FLAGS) -timeout 20m -run 'TestMetrics_ScrapeTime' -v ./node/agent/

TEST_PREREQS += metrics-deps
