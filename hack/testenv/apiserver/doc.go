// Package apiserver runs a real etcd and kube-apiserver (v1.34.4, built by
// `make testenv`) for integration tests, with nodevirt's CRDs installed. It
// is the part of the test environment (package testenv) that needs
// client-go, kept apart so that tests of packages without Kubernetes
// dependencies do not compile it.
//
// Start launches both on free loopback ports with data in t.TempDir(), waits
// until the API server is ready and the CRDs are Established, and stops both
// processes (by pid) in t.Cleanup. Each call starts a fresh pair; tests that
// share one give each subtest its own namespace.
//
// The API server authenticates a static bearer token mapped to the
// system:masters group and authorizes with RBAC, so tests that need a less
// privileged identity can create one. The ServiceAccount admission plugin is
// off, because no controller-manager runs to create default service accounts;
// pods can be created directly.
//
// Binaries are found in $NODEVIRT_OUT/k8s/bin (default <repo>/_output/k8s/bin).
// When they are missing the test is skipped, or fails when CI=true; in
// -short mode it is always skipped (testenv.RequireFiles).
package apiserver
