#!/usr/bin/env bash
# Build containerd v2.1.4 (containerd, containerd-shim-runc-v2, ctr) from the
# Go module proxy into $NODEVIRT_OUT/containerd/bin (default
# _output/containerd/bin) for the local cluster: Kubernetes image volumes
# (the launcher pods' one-container shape) need containerd >= 2.1, and Debian
# ships 1.6. The module is hack/containerd; Go's build cache makes a second
# run a no-op.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${NODEVIRT_OUT:-$root/_output}/containerd/bin
version=v2.1.4
mkdir -p "$out"
# btrfs and devmapper need cgo and the local cluster disables them; zfs is
# disabled too (config.sh).
(cd "$root/hack/containerd" && CGO_ENABLED=0 go build -trimpath -tags "no_btrfs no_devmapper no_zfs" \
	-ldflags "-s -w -X github.com/containerd/containerd/v2/version.Version=$version" -o "$out/" \
	github.com/containerd/containerd/v2/cmd/containerd \
	github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 \
	github.com/containerd/containerd/v2/cmd/ctr)
