# store/: the node agent's bbolt-backed memory. Needs no root, QEMU or artifacts.

.PHONY: test-store bench-store

test-store: ## Run the store tests, including the SIGKILLed-writer crash test.
	$(GO) test $(GOTEST_FLAGS) ./store/...

bench-store: ## Benchmark store Update and List with 100 records.
	$(GO) test -run '^$$' -bench . -benchmem ./store/...
