#!/usr/bin/env bash
# Deploy nodevirt from deploy/local onto the running local cluster
# (make cluster-up) and wait until it can run VMs: the controller and every
# agent are ready, every node is schedulable for VMs (heartbeat label and
# the devices.kubevirt.io/tun device plugin resource) and nodevirt-api's
# APIServices (subresources.kubevirt.io) are Available.
#
# deploy/local names the cluster's nodes directory by the placeholder
# /CLUSTER_DIR/nodes (an absolute host path known only at deploy time); this
# script substitutes the running cluster's state directory.
#
#   RESTART=1   restart the controller and agents after applying, so that
#               freshly imported images with an unchanged tag are used
#   TIMEOUT=s   how long to wait for readiness (default 180)
#   POD_SHAPE   launcher pod shape (ImageVolumes, Containers, Auto); default
#               ImageVolumes on a cluster with the ImageVolume gate, else
#               Containers. A change restarts the controller, which reads its
#               configuration when it becomes leader.
set -euo pipefail
# shellcheck source=cluster/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/cluster/lib.sh"

[ -f "$CLUSTER_DIR/cluster.env" ] || die "no cluster running in $CLUSTER_DIR (make cluster-up)"
TIMEOUT=${TIMEOUT:-180}

# The node API's CA (Secret nodevirt-ca) is made once per cluster, before
# the controller that mounts it: only the controller holds ca.key; it signs
# the agents' and nodevirt-api's CSRs and publishes ConfigMap
# nodevirt-ca-bundle.
kubectl get namespace nodevirt >/dev/null 2>&1 || kubectl create namespace nodevirt >/dev/null
if ! kubectl -n nodevirt get secret nodevirt-ca >/dev/null 2>&1; then
	log "creating the node API CA (Secret nodevirt-ca)"
	(cd "$REPO_ROOT" && go run ./hack/nodeca) | kubectl apply -f - >/dev/null
fi

# nodevirt-api's serving certificate, from a CA of its own whose ca.crt is
# the APIServices' caBundle (patched in below), made once per cluster.
if ! kubectl -n nodevirt get secret nodevirt-api-serving >/dev/null 2>&1; then
	log "creating nodevirt-api's serving certificate (Secret nodevirt-api-serving)"
	(cd "$REPO_ROOT" && go run ./hack/apicert) | kubectl apply -f - >/dev/null
fi
# The node API CA's public bundle (ConfigMap nodevirt-ca-bundle), before the
# pods that mount it: the controller's signer keeps it up to date, but a
# ConfigMap created after a pod started reaches that pod's volume only at
# the kubelet's next sync (up to a minute or more).
if ! kubectl -n nodevirt get configmap nodevirt-ca-bundle >/dev/null 2>&1; then
	kubectl -n nodevirt create configmap nodevirt-ca-bundle \
		--from-literal=ca.crt="$(kubectl -n nodevirt get secret nodevirt-ca -o jsonpath='{.data.ca\.crt}' | base64 -d)" >/dev/null
fi

if [ -n "${POD_SHAPE:-}" ]; then
	shape=$POD_SHAPE
elif [ "$IMAGE_VOLUMES" = true ]; then
	shape=ImageVolumes
else
	shape=Containers
fi
case $shape in ImageVolumes | Containers | Auto) ;; *) die "POD_SHAPE=$shape: want ImageVolumes, Containers or Auto" ;; esac
old_shape=$(kubectl -n nodevirt get configmap nodevirt-config -o jsonpath='{.data.launcherPodShape}' 2>/dev/null || true)

log "applying deploy/local (launcher pod shape $shape)"
kubectl kustomize "$REPO_ROOT/deploy/local" |
	sed -e "s#/CLUSTER_DIR/nodes#$CLUSTER_DIR/nodes#g" -e "s#LAUNCHER_POD_SHAPE#$shape#g" |
	kubectl apply -f - >/dev/null
kubectl wait --for=condition=Established --timeout=60s \
	crd/virtualmachines.kubevirt.io crd/virtualmachineinstances.kubevirt.io >/dev/null
ca_bundle=$(kubectl -n nodevirt get secret nodevirt-api-serving -o jsonpath='{.data.ca\.crt}')
for v in v1 v1alpha3; do
	kubectl patch apiservice "$v.subresources.kubevirt.io" --type=merge \
		-p "{\"spec\":{\"caBundle\":\"$ca_bundle\"}}" >/dev/null
done

if [ "${RESTART:-}" = 1 ]; then
	log "restarting the controller, agents and API server"
	kubectl -n nodevirt rollout restart deployment/nodevirt-controller daemonset/nodevirt-agent deployment/nodevirt-api >/dev/null
elif [ -n "$old_shape" ] && [ "$old_shape" != "$shape" ]; then
	log "launcher pod shape $old_shape -> $shape: restarting the controller"
	kubectl -n nodevirt rollout restart deployment/nodevirt-controller >/dev/null
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
