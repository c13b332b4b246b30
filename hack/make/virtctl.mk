# KubeVirt's virtctl v1.6.0, built from the pinned module hack/tools/virtctl
# (its go.mod says why it is a module of its own). Tests find it through
# hack/testenv.Virtctl, which runs this target when the binary is missing.
#
# The binary is rebuilt only when the module's go.mod/go.sum or this file
# change, so an up-to-date `make virtctl` returns at once. The -X flags stamp
# what KubeVirt's release build stamps (hack/version.sh in kubevirt): the
# release tag, its commit and the tag's date, so `virtctl version --client`
# reports v1.6.0 rather than the empty defaults of a plain go build. The
# binary is moved into place only once complete, so a test that finds it
# (or two builds racing) never runs a half-written file.

VIRTCTL_VERSION := v1.6.0
VIRTCTL_COMMIT := d53baa7f84687d156bd8a3a80d7ea2fbd8e0a993
VIRTCTL_DATE := 2025-07-24T19:23:44Z
VIRTCTL_MOD := $(CURDIR)/hack/tools/virtctl
VIRTCTL_LDFLAGS := $(foreach kv,gitVersion=$(VIRTCTL_VERSION) gitCommit=$(VIRTCTL_COMMIT) gitTreeState=clean buildDate=$(VIRTCTL_DATE),-X kubevirt.io/client-go/version.$(kv))

.PHONY: virtctl

virtctl: $(BIN)/virtctl ## Build KubeVirt's virtctl v1.6.0 (pinned in hack/tools/virtctl) into _output/bin/virtctl.

$(BIN)/virtctl: $(VIRTCTL_MOD)/go.mod $(VIRTCTL_MOD)/go.sum hack/make/virtctl.mk
	@mkdir -p $(BIN)
	cd $(VIRTCTL_MOD) && tmp=$@.tmp.$$$$ && \
		CGO_ENABLED=0 GOWORK=off $(GO) build -trimpath -ldflags '$(VIRTCTL_LDFLAGS)' -o $$tmp kubevirt.io/kubevirt/cmd/virtctl && \
		mv -f $$tmp $@

# The end-to-end suite drives this binary; building it up front keeps the
# minutes of a cold build out of a test's timeout.
TEST_PREREQS += virtctl
