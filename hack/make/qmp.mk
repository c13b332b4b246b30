# qmp: QMP and guest agent clients (qmp/), tested against real QEMU under TCG.

.PHONY: test-qmp bench-qmp

test-qmp: guest-images ## Run the qmp tests (fakes + real QEMU/TCG booting the test guest).
	$(GO) test $(GOTEST_FLAGS) ./qmp/...

bench-qmp: guest-images ## Benchmark QMP stop+cont and guest-agent ping on real QEMU (medians).
	$(GO) test -run '^$$' -bench BenchmarkQEMU -benchtime 2000x ./qmp/
