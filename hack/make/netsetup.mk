# netsetup: pod-network plumbing for VMs (netsetup/doc.go). Its root tests
# build throwaway netns and boot the test guest under TCG.

.PHONY: netsetup-deps test-netsetup bench-netsetup

netsetup-deps: ## Install what the netsetup root tests need (iproute2 for the test netns).
	hack/apt-install.sh iproute2

test-netsetup: netsetup-deps guest-images ## Run the netsetup tests (root: netns, nftables, QEMU guests).
	$(GO) test $(GOTEST_FLAGS) ./netsetup/...

bench-netsetup: netsetup-deps ## Benchmark a converged Ensure (the agent's re-adoption path) beside its floor (root).
	$(GO) test -run '^$$' -bench Ensure_Converged -benchmem -count 3 ./netsetup/

TEST_PREREQS += netsetup-deps
