# Upstream Prometheus with Kubernetes service discovery, for the acceptance
# suite's in-cluster scrape (e2e/acceptance, issue 10). Debian's prometheus
# package (make metrics-deps) is built without Kubernetes service discovery
# (kubernetes_sd_configs is not a known field: Debian patches it out), so
# this builds upstream Prometheus and promtool from the Go module proxy
# (nested module hack/prometheus, k8s.io/* pinned to the cluster's v0.34.4).
# Rebuilt only when hack/prometheus/go.mod or go.sum change; a cold build
# takes about 4 minutes on 2 cores.

# PROMETHEUS_VERSION must match hack/prometheus/go.mod
# (github.com/prometheus/prometheus v0.307.3 is Prometheus 3.7.3).
PROMETHEUS_VERSION := 3.7.3
PROMETHEUS_K8S := $(BIN)/prometheus $(BIN)/promtool

.PHONY: prometheus-k8s test-metrics-cluster

prometheus-k8s: $(PROMETHEUS_K8S) ## Build Prometheus with Kubernetes service discovery (upstream 3.7.3) into _output/bin (cached).

$(PROMETHEUS_K8S) &: hack/prometheus/go.mod hack/prometheus/go.sum
	@mkdir -p $(BIN)
	cd hack/prometheus && CGO_ENABLED=0 $(GO) build -trimpath \
		-ldflags '-s -w -X github.com/prometheus/common/version.Version=$(PROMETHEUS_VERSION)' \
		-o $(BIN)/ github.com/prometheus/prometheus/cmd/prometheus github.com/prometheus/prometheus/cmd/promtool
	@touch $(PROMETHEUS_K8S)

test-metrics-cluster: cluster-packages cluster-binaries images prometheus-k8s ## Run only the in-cluster Prometheus scrape (acceptance extra check, issue 10; reuses a running cluster).
	$(GO) test $(GOTEST_FLAGS) -v -timeout 40m -run 'TestAcceptance/issue10_' ./e2e/acceptance/

# The acceptance suite's extra check needs it too.
test-e2e: prometheus-k8s

TEST_PREREQS += prometheus-k8s
