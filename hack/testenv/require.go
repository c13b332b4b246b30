package testenv

import (
	"os"
	"testing"
)

// Require gates a test that needs something beyond the Go toolchain
// (root, QEMU, a built binary, a cluster). In -short mode the test is
// skipped whatever ok says. Otherwise, when ok is false, the test fails
// under CI=true (CI provides every prerequisite) and is skipped locally;
// both messages say what is missing and name the make target that
// provides it.
func Require(t testing.TB, ok bool, what, makeTarget string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("skipped in -short mode: needs %s (run `make %s`)", what, makeTarget)
	}
	if ok {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("prerequisite missing under CI=true: %s (provided by `make %s`)", what, makeTarget)
	}
	t.Skipf("prerequisite missing: %s (run `make %s`)", what, makeTarget)
}

// RequireFiles is Require for files a make target builds: each path must
// exist.
func RequireFiles(t testing.TB, makeTarget string, paths ...string) {
	t.Helper()
	for _, p := range paths {
		what := p
		_, err := os.Stat(p)
		if err != nil {
			what = err.Error()
		}
		Require(t, err == nil, what, makeTarget)
	}
}
