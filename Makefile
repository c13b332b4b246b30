# nodevirt Makefile. `make help` lists the targets.
#
# Targets live in hack/make/*.mk, one file per area, so that each area owns
# its rules. Each area may add prerequisites of `make test` to TEST_PREREQS.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

GO ?= go
OUT := $(CURDIR)/_output
BIN := $(OUT)/bin
TOOLS := $(GO) tool -modfile=$(CURDIR)/hack/tools/go.mod
GOTEST_FLAGS ?= -count=1

# Where tests find built artifacts (they fall back to these paths when run by hand).
export NODEVIRT_OUT := $(OUT)

TEST_PREREQS :=

include $(sort $(wildcard hack/make/*.mk))

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_.-]+:.*## / {printf "  \033[36m%-20s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST) | sort

##@ Build

CMDS := $(notdir $(patsubst %/main.go,%,$(wildcard cmd/*/main.go)))

.PHONY: build
build: ## Build every binary in cmd/ into _output/bin.
	@mkdir -p $(BIN)
	@if [ -n "$(CMDS)" ]; then CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/ $(addprefix ./cmd/,$(CMDS)); fi
	@echo "built: $(or $(CMDS),nothing yet)"

.PHONY: generate
generate: ## Regenerate deepcopy, clientset/listers/informers and CRDs from cluster/api/v1.
	hack/update-codegen.sh

.PHONY: verify-generated
verify-generated: ## Fail if generated code or CRDs differ from what `make generate` writes.
	hack/verify-codegen.sh

.PHONY: testenv
testenv: ## Build etcd 3.5 and kube-apiserver v1.34.4 for integration tests (cached).
	hack/build-k8s.sh etcd kube-apiserver

##@ Test

.PHONY: lint
lint: ## gofmt check, go vet, staticcheck (pinned in hack/tools) and shellcheck over hack/ (installs it).
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(TOOLS) staticcheck ./...
	hack/apt-install.sh shellcheck
	hack/lint-shell.sh

.PHONY: test-unit
test-unit: ## The inner loop: go test -short ./... (no root, QEMU, API server or cluster; < 2 min).
	$(GO) test -short $(GOTEST_FLAGS) ./...

.PHONY: test
test: testenv $(TEST_PREREQS) verify-generated lint ## The full test suite, as CI runs it (installs what it needs; root for network/VM tests).
	GO="$(GO)" GOTEST_FLAGS="$(GOTEST_FLAGS)" hack/test.sh

.PHONY: clean
clean: ## Remove build output (_output/). The local cluster has its own teardown.
	rm -rf $(OUT)
