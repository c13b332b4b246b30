// Package consoleui holds the end-to-end test of the console in the
// browser (cluster/consoleui, `kubectl nodevirt console-ui`): on the local
// cluster with nodevirt deployed, the plugin binary runs as a
// ServiceAccount user with edit rights in one namespace and none in
// another, and browser.mjs drives Debian's chromium through
// playwright-core (no browser download) over the page: the VM list, the
// serial terminal, the VNC canvas (pixel check), guest-agent data, pause
// (checked on the API), restart with the console reconnecting, a narrow
// window, and the namespace without rights (an error, no data).
//
// Screenshots go to $NODEVIRT_OUT/consoleui (default _output/consoleui).
// `make test-console-ui-e2e` installs what it needs and runs it; it takes
// the host's cluster lock and reuses a running cluster.
package consoleui
