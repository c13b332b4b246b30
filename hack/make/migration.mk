# Live migration (issue 16): its end-to-end suite (e2e/migration) runs on a
# two-node local cluster that it brings up itself (or reuses when one with
# two nodes runs), with nodevirt deployed by hack/deploy-local.sh. Root.

.PHONY: test-migration

test-migration: cluster-packages cluster-binaries images ## Run the live-migration scenarios (17, 18) on a two-node local cluster (root).
	$(GO) test $(GOTEST_FLAGS) -v -timeout 60m ./e2e/migration/

.PHONY: bench-migration
bench-migration: cluster-packages cluster-binaries images guest-images ## Benchmark live migration on a two-node local cluster (256 MiB and 1 GiB guests, idle and dirtying, 10 each, beside bare-QEMU floors; drain of 4); report in docs/migration-benchmarks.md.
	NODEVIRT_MIGRATION_BENCH=full $(GO) test -count=1 -v -timeout 90m -run 'TestMigration/Bench' ./e2e/migration/
