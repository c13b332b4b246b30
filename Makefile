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
