// Package promtest runs a real Prometheus server as a child process of a
// test, so that tests can check what a user's Prometheus sees: the scrape
// config, service discovery and relabelling, target health, and PromQL
// results through the HTTP API.
//
// By default it runs the Debian prometheus package's binary (`make
// metrics-deps`), which Debian builds without Kubernetes service discovery
// (tests give it static or file_sd targets); Config.Binary names another.
//
// Start writes the configuration (global scrape interval plus the caller's
// scrape_configs) to a temporary directory, checks it with `promtool check
// config` when a promtool is installed (next to Config.Binary, or on $PATH),
// starts Prometheus on a free loopback port with its storage in that
// directory and waits until it is ready. The test's cleanup kills the
// process by its pid and waits for it; the directory goes with t.TempDir. On
// a failed test the log tail is printed.
//
// Without the Debian prometheus binary the test is skipped, naming the make
// target that installs it, or fails when CI=true. A Config.Binary that does
// not exist fails the test: the caller decides whether that is a skip.
//
// A Server is safe for concurrent queries; Start and the cleanup belong to
// the test goroutine.
package promtest
