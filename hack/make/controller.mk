# The cluster controller (cluster/vm, cluster/vmi, cluster/node,
# cluster/controller, cmd/nodevirt-controller). Its integration tests run
# the controller as a process against the real kube-apiserver of `make
# testenv`; no root needed.

BENCH_VMIS ?= 1000

.PHONY: test-controller bench-controller

test-controller: testenv ## Run the controller's unit and integration tests (real kube-apiserver, controller as a process).
	$(GO) test $(GOTEST_FLAGS) ./cluster/vm/... ./cluster/vmi/... ./cluster/node/... ./cluster/reconcile/... ./cluster/controller/... ./cmd/nodevirt-controller/...

bench-controller: testenv ## Benchmark: BENCH_VMIS (default 1000) VMIs → launcher pods; controller RSS per VMI.
	NODEVIRT_BENCH_VMIS=$(BENCH_VMIS) $(GO) test -count=1 -run '^$$' -bench BenchmarkLaunchPods -benchtime=1x -timeout 60m ./cluster/controller/
