# The console in the browser (cluster/consoleui, `kubectl nodevirt
# console-ui`). The page's npm dependencies are pinned in
# cluster/consoleui/web/package-lock.json; `npm ci` runs only when the lock
# changes (a stamp in node_modules). esbuild bundles the page into
# cluster/consoleui/assets (not committed), which the Go binary embeds.
# The end-to-end test (e2e/consoleui) drives Debian's chromium with
# playwright-core (no browser download).

CONSOLEUI_WEB := cluster/consoleui/web
CONSOLEUI_ASSETS := cluster/consoleui/assets
CONSOLEUI_STAMP := $(CONSOLEUI_WEB)/node_modules/.nodevirt-npm-ci
CONSOLEUI_SRC := $(wildcard $(CONSOLEUI_WEB)/src/*) $(CONSOLEUI_WEB)/index.html $(CONSOLEUI_WEB)/build.mjs

.PHONY: console-ui console-ui-node console-ui-deps test-console-ui test-console-ui-e2e

console-ui: $(CONSOLEUI_ASSETS)/app.js ## Bundle the console page (npm ci + esbuild) and build _output/bin/kubectl-nodevirt with it.
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/kubectl-nodevirt ./cmd/kubectl-nodevirt
	@echo "built $(BIN)/kubectl-nodevirt; put it on PATH and run: kubectl nodevirt console-ui"

console-ui-node: ## Install node and npm (Debian packages) when missing.
	@command -v node >/dev/null && command -v npm >/dev/null || hack/apt-install.sh nodejs npm

$(CONSOLEUI_STAMP): $(CONSOLEUI_WEB)/package.json $(CONSOLEUI_WEB)/package-lock.json | console-ui-node
	cd $(CONSOLEUI_WEB) && npm ci --no-audit --no-fund
	@touch $@

$(CONSOLEUI_ASSETS)/app.js: $(CONSOLEUI_STAMP) $(CONSOLEUI_SRC)
	cd $(CONSOLEUI_WEB) && node build.mjs

console-ui-deps: console-ui ## What the console tests need: the bundle, node, playwright-core (npm) and Debian's chromium.
	hack/apt-install.sh chromium fonts-dejavu-core

test-console-ui: testenv console-ui-deps ## Console unit and API-server integration tests.
	$(GO) test $(GOTEST_FLAGS) ./cluster/consoleui/...

test-console-ui-e2e: console-ui-deps cluster-packages cluster-binaries images ## Console end-to-end: chromium + Playwright against the local cluster (reuses a running one); screenshots in _output/consoleui.
	$(GO) test $(GOTEST_FLAGS) -v -timeout 30m ./e2e/consoleui/

TEST_PREREQS += console-ui-deps
