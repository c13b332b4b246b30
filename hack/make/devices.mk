# Device plugins (node/deviceplugin) and the node heartbeat (node/heartbeat):
# packages the node agent runs. Their unit tests need nothing; the heartbeat
# integration test needs the test API server, the device plugin test a real
# kubelet (e2e/devices: it starts, or reuses, a one-node local cluster; root).

.PHONY: test-devices

test-devices: testenv cluster-packages cluster-binaries images ## Run the device plugin and heartbeat tests (root: real kubelet on the local cluster).
	$(GO) test $(GOTEST_FLAGS) -v ./node/deviceplugin/... ./node/heartbeat/... ./e2e/devices/...
