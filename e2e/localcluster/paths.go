package localcluster

import (
	"github.com/nodevirt/nodevirt/hack/testenv"
)

// RepoRoot returns the nearest parent of the working directory whose go.mod
// declares the nodevirt module (testenv.RepoRoot).
func RepoRoot() (string, error) { return testenv.RepoRoot() }

// OutDir returns where built artifacts live: $NODEVIRT_OUT, else
// <repo root>/_output (testenv.OutDir).
func OutDir() (string, error) { return testenv.OutDir() }
