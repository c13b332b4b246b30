# The demo (docs/demo.md) and the end-to-end suite (e2e/acceptance), run on
# the local cluster (hack/cluster). Owned by the e2e area.

.PHONY: demo demo-down test-e2e

demo: cluster-up ## Bring up the local cluster, deploy nodevirt, start deploy/examples/vm.yaml and show the guest.
	hack/demo.sh

demo-down: cluster-down ## Stop the demo (the local cluster).

test-e2e: cluster-packages cluster-binaries images ## Run the acceptance scenarios on the local cluster (reuses a running one).
	$(GO) test $(GOTEST_FLAGS) -v -timeout 30m ./e2e/acceptance/

# The acceptance suite (part of make test) runs longer than go test's
# default 10 minute limit per package (about 25 minutes), and a cluster suite
# run beside another one by hand (go test ./...) waits for the cluster lock
# inside its own time limit.
GOTEST_FLAGS += -timeout 85m
