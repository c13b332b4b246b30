//go:build tools

// Package tools pins the CSI external-provisioner sidecar this module
// builds, so that `go mod tidy` keeps its dependencies.
package tools

import _ "github.com/kubernetes-csi/external-provisioner/v5/cmd/csi-provisioner"
