#!/usr/bin/env bash
# Build upstream Kubernetes v1.34.4 components and etcd 3.5 from the Go module
# proxy into $NODEVIRT_OUT/k8s/bin (default _output/k8s/bin).
#
#   hack/build-k8s.sh kube-apiserver etcd            # the test API server
#   hack/build-k8s.sh kube-apiserver kube-scheduler kube-controller-manager kubelet kube-proxy kubectl etcd
#
# Go's build cache makes a second run a no-op; the binaries are reproducible.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${NODEVIRT_OUT:-$root/_output}/k8s/bin
version=v1.34.4
mkdir -p "$out"

ldflags="-s -w"
for v in gitVersion=$version gitMajor=1 gitMinor=34 gitTreeState=clean buildDate=2026-01-01T00:00:00Z; do
	ldflags+=" -X k8s.io/component-base/version.$v"
done
for v in gitVersion=$version gitMajor=1 gitMinor=34; do
	ldflags+=" -X k8s.io/client-go/pkg/version.$v"
done

pkgs=()
for c in "$@"; do
	case $c in
	etcd)
		(cd "$root/hack/etcd" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$out/etcd" .)
		;;
	kube-apiserver | kube-scheduler | kube-controller-manager | kubelet | kube-proxy | kubectl)
		pkgs+=("k8s.io/kubernetes/cmd/$c")
		;;
	*)
		echo "build-k8s.sh: unknown component $c" >&2
		exit 2
		;;
	esac
done
if ((${#pkgs[@]})); then
	(cd "$root/hack/k8s" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$out/" "${pkgs[@]}")
fi
