// Package testenv is nodevirt's test environment: what tests across the
// repository share instead of hand-rolling it.
//
//   - [Eventually] polls a condition with a deadline (never sleep-and-hope).
//   - [LockedBuffer] collects a child process's or a logger's output while
//     the test reads it.
//   - [Require] and [RequireFiles] gate tests on a prerequisite (root, QEMU,
//     built binaries): missing, the test fails under CI=true and is skipped
//     otherwise with a message naming the make target that provides it. In
//     -short mode (`make test-unit`) such tests are always skipped, even
//     under CI=true: the inner loop needs no root, QEMU or cluster.
//   - [RepoRoot], [OutDir] and [FreeLoopbackAddr] locate build output and
//     pick ports.
//   - [Virtctl] and [KubeVirtExamples] give tests the KubeVirt release
//     pinned in hack/tools/virtctl: its virtctl binary (built by `make
//     virtctl` when missing) and its published examples/ in the Go module
//     cache, read in place.
//
// This package imports only the standard library, so the tests of qmp,
// netsetup and store (which import nothing of nodevirt's) can use it
// without compiling client-go. The real etcd + kube-apiserver environment,
// which does need client-go, is the subpackage testenv/apiserver.
//
// Helpers that can fail the test (Eventually, Require, RequireFiles,
// FreeLoopbackAddr, Virtctl, KubeVirtExamples) call t.Fatal and so must run
// on the test's goroutine.
package testenv
