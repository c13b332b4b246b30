package localcluster

import (
	"github.com/nodevirt/nodevirt/cluster/apitest"
)

// RepoRoot returns the nearest parent of the working directory whose go.mod
// declares the nodevirt module (apitest.RepoRoot).
func RepoRoot() (string, error) { return apitest.RepoRoot() }

// OutDir returns where built artifacts live: $NODEVIRT_OUT, else
// <repo root>/_output (apitest.OutDir).
func OutDir() (string, error) { return apitest.OutDir() }
