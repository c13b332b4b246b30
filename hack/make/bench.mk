# Benchmarks on the local cluster (e2e/bench): writes a markdown + JSON
# report to _output/bench/ and the latest to docs/benchmarks.{md,json}.
# Never fails on a number; fails on an error. Root; starts the local
# cluster if none runs (and stops it again unless BENCH_FLAGS has -keep).

BENCH_FLAGS ?=

.PHONY: bench

bench: cluster-packages cluster-binaries images ## Run the benchmarks on the local cluster (BENCH_FLAGS: e.g. -only burst,restart -controller-vmis 1000); report in docs/benchmarks.md; then bench-migration (two nodes).
	$(GO) run ./e2e/bench -docs $(BENCH_FLAGS)
	$(MAKE) --no-print-directory bench-migration
