# node agent (node/agent, cmd/nodevirt-agent). Its integration test runs a
# real kube-apiserver (make testenv), the real agent and launcher processes
# and QEMU under TCG in throwaway network namespaces (root).

.PHONY: agent-deps test-agent bench-agent-scale

agent-deps: ## Install what the agent's integration test needs (iproute2 for its netns).
	hack/apt-install.sh iproute2

test-agent: testenv guest-images agent-deps ## Run the node agent tests (unit + integration: apiserver, agent, launcher, QEMU).
	$(GO) test $(GOTEST_FLAGS) -timeout 30m ./node/agent/... ./node/status/... ./node/podfs/... ./cmd/nodevirt-agent/...

bench-agent-scale: testenv guest-images agent-deps ## Measure the agent with 100 VMs (BENCH_VMS): Scheduled → Running when they arrive 100 ms apart, re-adoption after an agent SIGKILL (real agent, launchers, QEMU).
	NODEVIRT_BENCH=1 NODEVIRT_BENCH_VMS=$(or $(BENCH_VMS),100) $(GO) test $(GOTEST_FLAGS) -timeout 20m -run 'TestScale_BurstAndRestart' -v ./node/agent/

TEST_PREREQS += agent-deps
