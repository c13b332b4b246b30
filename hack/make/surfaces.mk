# Node agent surfaces: the node API (node/api), pause/unpause, console/VNC
# websockets, guest data, mTLS, and nodectl (cmd/nodectl). The integration
# test runs in the agent's harness (real kube-apiserver, agent, launcher,
# QEMU under TCG; root).

.PHONY: nodectl test-surfaces bench-pause

nodectl: ## Build nodectl into $(BIN).
	CGO_ENABLED=0 $(GO) build -o $(BIN)/ ./cmd/nodectl

test-surfaces: testenv guest-images agent-deps ## Run the node API and nodectl tests (unit + real-QEMU integration: pause latency, screenshot, port-forward, soft reboot).
	$(GO) test $(GOTEST_FLAGS) ./node/api/... ./cmd/nodectl/...
	$(GO) test $(GOTEST_FLAGS) -timeout 15m -run 'TestSurfaces_Integration|TestSubresources_Integration|TestPlan_Pause|TestPlan_SoftReboot' -v ./node/agent/

bench-pause: testenv guest-images agent-deps ## Measure pause/unpause latency at the node API (p50/p99 over 200 calls, real QEMU; with 1, 101 and 1001 records in the store).
	NODEVIRT_BENCH=1 $(GO) test $(GOTEST_FLAGS) -timeout 15m -run 'TestPause_Latency' -v ./node/agent/

.PHONY: node-ca
node-ca: ## Write a fresh node API CA as Secret nodevirt-ca to $(OUT)/deploy/nodevirt-ca.yaml (deploy-time step; kubectl apply it once; only nodevirt-controller mounts it).
	mkdir -p $(OUT)/deploy
	test -s $(OUT)/deploy/nodevirt-ca.yaml || $(GO) run ./hack/nodeca > $(OUT)/deploy/nodevirt-ca.yaml
