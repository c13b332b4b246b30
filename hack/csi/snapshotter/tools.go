//go:build tools

// Package tools pins the CSI snapshot sidecar and the snapshot controller
// this module builds, so that `go mod tidy` keeps their dependencies.
package tools

import (
	_ "github.com/kubernetes-csi/external-snapshotter/v8/cmd/csi-snapshotter"
	_ "github.com/kubernetes-csi/external-snapshotter/v8/cmd/snapshot-controller"
)
