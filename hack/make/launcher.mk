# Launch spec, cloud-init ISO, qcow2 images and the launcher (node/launchspec,
# node/cloudinit, node/qcow2, node/launcher, cmd/nodevirt-launcher). The
# launcher tests build the launcher and boot the test guest under TCG (make
# guest-images).

FUZZTIME ?= 30s

.PHONY: test-launcher fuzz-launchspec launcher-rss

test-launcher: guest-images ## Run the launch spec, cloud-init and launcher tests (real QEMU under TCG).
	$(GO) test $(GOTEST_FLAGS) ./node/launchspec/... ./node/cloudinit/... ./node/qcow2/... ./node/launcher/... ./cmd/nodevirt-launcher/...

fuzz-launchspec: ## Fuzz the VMI -> QEMU argv converter for option injection (FUZZTIME=30s).
	$(GO) test -run '^$$' -fuzz '^FuzzBuild$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 2s -parallel 1 ./node/launchspec/convert/

launcher-rss: guest-images ## Boot a guest through the launcher and print its RSS and boot timings.
	$(GO) test $(GOTEST_FLAGS) -v -run 'TestLauncher_(KernelBootShutdown|StopBeforeLaunch)$$' ./node/launcher/ | grep -E 'RSS|->|^(ok|FAIL|---)'
