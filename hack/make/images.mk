# Container images assembled without docker (hack/images/): OCI archives in
# _output/images/, imported into the running local cluster as
# $(IMAGE_PREFIX)/<name>:$(IMAGE_TAG).

IMAGE_PREFIX ?= nodevirt.local
IMAGE_TAG ?= dev
REGISTRY ?=
export IMAGE_PREFIX IMAGE_TAG

.PHONY: images push

images: guest-images ## Build the images (pause, probe, cmd/*, launcher, guest) into _output/images and import them into the local cluster.
	hack/apt-install.sh qemu-system-x86 qemu-utils ipxe-qemu seabios ovmf swtpm
	hack/images/build.sh

push: images ## Push the images (not pause/probe) to REGISTRY, e.g. make push REGISTRY=quay.io/nodevirt.
	@test -n "$(REGISTRY)" || { echo "push: set REGISTRY=host[:port][/path]" >&2; exit 1; }
	$(OUT)/images/tools/imagebuild push -registry $(REGISTRY) \
		$(filter-out %/pause.tar %/probe.tar,$(wildcard $(OUT)/images/*.tar))

.PHONY: test-images
test-images: ## Unit tests of the image builder (nested module hack/images).
	cd hack/images && $(GO) test $(GOTEST_FLAGS) ./...
