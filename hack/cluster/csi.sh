#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Install the local cluster's CSI storage (idempotent): the snapshot CRDs
# (from the external-snapshotter release hack/build-csi.sh pinned), the
# snapshot controller, the driver hack/csihostpath with its provisioner and
# snapshotter sidecars, the default StorageClass and VolumeSnapshotClass
# nodevirt-csi; then wait until every node's kubelet has registered the
# driver. Volumes live in $CLUSTER_DIR/csi, which every node reaches: any
# access mode works on any node (docs/local-cluster.md, Storage).
#
#   TIMEOUT=s   how long to wait (default 120)
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

[ -f "$CLUSTER_DIR/cluster.env" ] || die "no cluster running in $CLUSTER_DIR (make cluster-up)"
TIMEOUT=${TIMEOUT:-120}
crds=$(cat "$NODEVIRT_OUT/csi/crd-dir" 2>/dev/null) || die "no CSI build (make cluster-binaries images)"
manifests=$REPO_ROOT/hack/cluster/csi

# The driver's sockets live in each node's kubelet directory; a unix socket's
# address holds at most 107 bytes (the registration socket's name is short).
for ((i = 0; i < NODES; i++)); do
	sock=$CLUSTER_DIR/nodes/$(node_name "$i")/kubelet/plugins/hostpath.csi.nodevirt.local/csi.sock
	((${#sock} <= 107)) || die "CSI socket $sock is ${#sock} bytes, over the 107 a unix socket holds: use a shorter CLUSTER_DIR"
done

log "installing the CSI storage (driver hostpath.csi.nodevirt.local, class nodevirt-csi)"
for f in "$crds"/snapshot.storage.k8s.io_*.yaml; do
	kubectl apply --server-side --field-manager=cluster-csi -f "$f" >/dev/null
done
kubectl wait --for=condition=Established --timeout=60s \
	crd/volumesnapshots.snapshot.storage.k8s.io crd/volumesnapshotcontents.snapshot.storage.k8s.io \
	crd/volumesnapshotclasses.snapshot.storage.k8s.io >/dev/null
kubectl get namespace csi-hostpath >/dev/null 2>&1 || kubectl create namespace csi-hostpath >/dev/null
mkdir -p "$CLUSTER_DIR/csi"
for f in rbac driver controller node; do
	sed "s#CLUSTER_DIR#$CLUSTER_DIR#g" "$manifests/$f.yaml" |
		kubectl apply --server-side --field-manager=cluster-csi -f - >/dev/null
done
for w in deployment/csi-hostpath-controller deployment/snapshot-controller daemonset/csi-hostpath-node; do
	kubectl -n csi-hostpath rollout status "$w" --timeout="${TIMEOUT}s" >/dev/null
done

registered() { kubectl get csinode "$1" -o jsonpath='{.spec.drivers[*].name}' 2>/dev/null | grep -qw hostpath.csi.nodevirt.local; }
for ((i = 0; i < NODES; i++)); do
	wait_for "$TIMEOUT" "node $(node_name "$i") to register the CSI driver" registered "$(node_name "$i")"
done
log "CSI storage ready"
