#!/usr/bin/env bash
# Deploy nodevirt onto the running local cluster (make cluster-up) as users
# install it, with two applies: nodevirt-operator (deploy/local/operator),
# then the KubeVirt resource (hack/localkubevirt: deploy/local's patches as
# spec.customizeComponents, with this cluster's state directory and the
# launcher pod shape filled in). The operator installs the CRDs, RBAC,
# admission policies, certificates, the controller, the agents and
# nodevirt-api. Then wait until nodevirt can run VMs: the KubeVirt is
# Deployed, every node is schedulable for VMs (heartbeat label and the
# devices.kubevirt.io/tun device plugin resource) and nodevirt-api's
# APIServices (subresources.kubevirt.io) are Available.
#
# An installation made by an older version of this script (kubectl apply
# of deploy/local) is taken over in place: its certificates are kept, its
# VMs keep running.
#
#   RESTART=1   restart the operator and the components after applying, so
#               that freshly imported images with an unchanged tag are used
#   TIMEOUT=s   how long to wait for readiness (default 180)
#   POD_SHAPE   launcher pod shape (ImageVolumes, Containers, Auto); default
#               ImageVolumes on a cluster with the ImageVolume gate, else
#               Containers. A change is in force for the next VMI (the
#               controller watches its configuration).
set -euo pipefail
# shellcheck source=cluster/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/cluster/lib.sh"

[ -f "$CLUSTER_DIR/cluster.env" ] || die "no cluster running in $CLUSTER_DIR (make cluster-up)"
TIMEOUT=${TIMEOUT:-180}

if [ -n "${POD_SHAPE:-}" ]; then
	shape=$POD_SHAPE
elif [ "$IMAGE_VOLUMES" = true ]; then
	shape=ImageVolumes
else
	shape=Containers
fi
case $shape in ImageVolumes | Containers | Auto) ;; *) die "POD_SHAPE=$shape: want ImageVolumes, Containers or Auto" ;; esac

log "applying deploy/local/operator (nodevirt-operator)"
kubectl apply -k "$REPO_ROOT/deploy/local/operator" >/dev/null
kubectl wait --for=condition=Established --timeout=60s crd/kubevirts.kubevirt.io >/dev/null
if [ "${RESTART:-}" = 1 ]; then
	kubectl -n nodevirt rollout restart deployment/nodevirt-operator >/dev/null
fi
kubectl -n nodevirt rollout status deployment/nodevirt-operator --timeout="${TIMEOUT}s" >/dev/null

log "applying the local KubeVirt resource (launcher pod shape $shape)"
# Server-side, as field manager deploy-local: what this script sets is its
# own, and whoever applies other fields of the resource (kubectl apply
# --server-side of spec.configuration, say) keeps theirs.
(cd "$REPO_ROOT" && go run ./hack/localkubevirt -cluster-dir "$CLUSTER_DIR" -pod-shape "$shape") |
	kubectl apply --server-side --field-manager=deploy-local --force-conflicts -f - >/dev/null

# Deployed: the operator saw this generation, and every component ran the
# target version and was available (the rollouts below then wait out any
# roll the apply started).
gen=$(kubectl -n nodevirt get kubevirt kubevirt -o jsonpath='{.metadata.generation}')
log "waiting for the KubeVirt resource (generation $gen) to be Deployed"
kubectl -n nodevirt wait kubevirt/kubevirt --timeout="${TIMEOUT}s" --for=jsonpath='{.status.observedGeneration}'="$gen" >/dev/null
kubectl -n nodevirt wait kubevirt/kubevirt --timeout="${TIMEOUT}s" --for=jsonpath='{.status.phase}'=Deployed >/dev/null
kubectl -n nodevirt wait kubevirt/kubevirt --timeout="${TIMEOUT}s" --for=condition=Available >/dev/null

if [ "${RESTART:-}" = 1 ]; then
	log "restarting the controller, agents and API server"
	kubectl -n nodevirt rollout restart deployment/nodevirt-controller daemonset/nodevirt-agent deployment/nodevirt-api >/dev/null
fi
kubectl -n nodevirt rollout status deployment/nodevirt-controller --timeout="${TIMEOUT}s" >/dev/null
kubectl -n nodevirt rollout status daemonset/nodevirt-agent --timeout="${TIMEOUT}s" >/dev/null
kubectl -n nodevirt rollout status deployment/nodevirt-api --timeout="${TIMEOUT}s" >/dev/null
log "waiting for the subresources.kubevirt.io APIServices"
if ! kubectl wait --for=condition=Available --timeout="${TIMEOUT}s" \
	apiservice/v1.subresources.kubevirt.io apiservice/v1alpha3.subresources.kubevirt.io >/dev/null; then
	# What the aggregator saw, where the Service points and what the
	# server said: enough to tell a routing fault from a server fault.
	kubectl get apiservices -o wide | grep subresources || true
	kubectl -n nodevirt get pods,endpointslices -o wide || true
	kubectl -n nodevirt logs deploy/nodevirt-api --tail=40 || true
	grep -E 'subresources\.kubevirt\.io' "$CLUSTER_DIR/logs/kube-apiserver.log" | tail -n 20 || true
	exit 1
fi

# vm_ready NODE: the agent's heartbeat marked NODE schedulable and its device
# plugin offers tun.
vm_ready() {
	kubectl get node "$1" -o jsonpath='{.metadata.labels.kubevirt\.io/schedulable}/{.status.allocatable.devices\.kubevirt\.io/tun}' |
		grep -Eq '^true/[1-9]'
}
log "waiting for schedulable nodes with devices.kubevirt.io/tun"
for ((i = 0; i < NODES; i++)); do
	wait_for "$TIMEOUT" "node $(node_name "$i") schedulable for VMs" vm_ready "$(node_name "$i")"
done
log "nodevirt deployed"
