#!/usr/bin/env bash
# Build the Kubernetes CSI sidecars the local cluster's storage driver
# (hack/csihostpath) runs with, from the Go module proxy, into
# $NODEVIRT_OUT/csi/bin (default _output/csi/bin):
#   csi-provisioner      external-provisioner v5.3.0  (module hack/csi/provisioner)
#   csi-snapshotter      external-snapshotter v8.4.0  (module hack/csi/snapshotter)
#   snapshot-controller  external-snapshotter v8.4.0
# and writes the directory of the snapshot CRDs (the snapshotter's client
# module, config/crd) to $NODEVIRT_OUT/csi/crd-dir.
#
# Go's build cache makes a second run a no-op.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${NODEVIRT_OUT:-$root/_output}/csi
mkdir -p "$out/bin"
export CGO_ENABLED=0
(cd "$root/hack/csi/provisioner" &&
	go build -trimpath -ldflags "-s -w" -o "$out/bin/" github.com/kubernetes-csi/external-provisioner/v5/cmd/csi-provisioner)
(cd "$root/hack/csi/snapshotter" &&
	go build -trimpath -ldflags "-s -w" -o "$out/bin/" \
		github.com/kubernetes-csi/external-snapshotter/v8/cmd/csi-snapshotter \
		github.com/kubernetes-csi/external-snapshotter/v8/cmd/snapshot-controller &&
	go mod download github.com/kubernetes-csi/external-snapshotter/client/v8 &&
	go list -m -f '{{.Dir}}/config/crd' github.com/kubernetes-csi/external-snapshotter/client/v8 >"$out/crd-dir.tmp")
mv "$out/crd-dir.tmp" "$out/crd-dir"
