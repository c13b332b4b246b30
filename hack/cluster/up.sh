#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Start the local Kubernetes v1.34.4 cluster (make cluster-up):
#   etcd -> kube-apiserver -> scheduler + controller-manager, and per node a
#   host-only bridge with the node IP, containerd (+ imported images), kubelet;
#   then one kube-proxy. Configuration: see lib.sh (NODES=2 for two nodes).
#
# Idempotent: with the cluster running it reports it and exits 0. Host state it
# changes (links, sysctls, cgroups, iptables/nftables, directories) is recorded
# under $CLUSTER_DIR/host at the first start and undone by down.sh.
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=pki.sh
. "$(dirname "$0")/pki.sh"
# shellcheck source=config.sh
. "$(dirname "$0")/config.sh"
# shellcheck source=host.sh
. "$(dirname "$0")/host.sh"

preflight() {
	local b
	[ "$(id -u)" = 0 ] || die "must run as root"
	((NODES >= 1 && NODES <= 8)) || die "NODES=$NODES: want 1..8"
	for b in etcd kube-apiserver kube-scheduler kube-controller-manager kubelet kube-proxy kubectl; do
		[ -x "$K8S_BIN/$b" ] || die "$K8S_BIN/$b missing: run make cluster-binaries"
	done
	[ -f "$IMAGES_DIR/pause.tar" ] || die "$IMAGES_DIR/pause.tar missing: run make images"
	for b in containerd containerd-shim-runc-v2 ctr; do
		[ -x "$CONTAINERD_BIN/$b" ] || die "$CONTAINERD_BIN/$b missing: run make cluster-binaries"
	done
	for b in runc iptables nft openssl curl bc setsid ip unshare nsenter; do
		command -v "$b" >/dev/null || die "$b not installed: run make cluster-up (it installs packages)"
	done
	[ -x "$CNI_BIN/bridge" ] || die "$CNI_BIN/bridge missing (containernetworking-plugins)"
}

# running_state prints "up" when every daemon of this cluster runs, "down"
# when none does, "partial" otherwise.
running_state() {
	local n=0 up=0 name
	for name in etcd kube-apiserver kube-scheduler kube-controller-manager kube-proxy $(node_daemons); do
		n=$((n + 1))
		alive "$name" && up=$((up + 1))
	done
	if ((up == n)); then echo up; elif ((up == 0)); then echo down; else echo partial; fi
}

node_daemons() {
	local i
	for ((i = 0; i < NODES; i++)); do echo "containerd$i kubelet$i"; done
}

check_host_free() {
	local other port
	if [ -f "$HOST_MARKER" ]; then
		other=$(cat "$HOST_MARKER")
		if [ "$other" != "$CLUSTER_DIR" ] && [ -d "$other/run" ] && [ -n "$(ls "$other"/run/*.pid 2>/dev/null)" ]; then
			die "another local cluster runs from $other: stop it first (CLUSTER_DIR=$other make cluster-down)"
		fi
	fi
	if [ ! -f "$HOST/recorded" ] && iptables -w -t nat -S 2>/dev/null | grep -q '^-N KUBE-'; then
		die "the host already has KUBE-* iptables chains (another Kubernetes?); cluster-down would remove them"
	fi
	for port in "$ETCD_PORT" $((ETCD_PORT + 1)) "$API_PORT" "$SCHEDULER_PORT" "$CONTROLLER_MANAGER_PORT" \
		"$PROXY_HEALTHZ_PORT" "$PROXY_METRICS_PORT" "$KUBELET_PORT"; do
		ss -Hltn "sport = :$port" | grep -q . && die "TCP port $port is in use (see lib.sh to pick other ports)"
	done
	return 0
}

report() {
	local i
	echo "cluster: $NODES node(s), state in $CLUSTER_DIR"
	kubectl get nodes -o wide 2>/dev/null | sed 's/^/  /'
	echo "  export KUBECONFIG=$KUBECONFIG_ADMIN"
}

start_etcd() {
	rm -rf "$CLUSTER_DIR/etcd"
	START_CGROUP=$CONTROL_CGROUP start etcd "$K8S_BIN/etcd" -data-dir "$CLUSTER_DIR/etcd" -unsafe-no-fsync \
		-listen-client-url "http://127.0.0.1:$ETCD_PORT" -listen-peer-url "http://127.0.0.1:$((ETCD_PORT + 1))"
}

start_apiserver() {
	START_CGROUP=$CONTROL_CGROUP start kube-apiserver "$K8S_BIN/kube-apiserver" \
		--etcd-servers="http://127.0.0.1:$ETCD_PORT" \
		--bind-address="$API_IP" --advertise-address="$API_IP" --secure-port="$API_PORT" \
		--tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
		--client-ca-file="$PKI/ca.crt" --anonymous-auth=false \
		--service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key" \
		--service-account-issuer=https://kubernetes.default.svc.cluster.local \
		--service-cluster-ip-range="$SERVICE_CIDR" --service-node-port-range=31000-31999 \
		--authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
		--allow-privileged=true \
		--kubelet-client-certificate="$PKI/apiserver-kubelet-client.crt" \
		--kubelet-client-key="$PKI/apiserver-kubelet-client.key" \
		--kubelet-certificate-authority="$PKI/ca.crt" \
		--kubelet-preferred-address-types=InternalIP,Hostname \
		--proxy-client-cert-file="$PKI/front-proxy-client.crt" --proxy-client-key-file="$PKI/front-proxy-client.key" \
		--requestheader-client-ca-file="$PKI/ca.crt" --requestheader-allowed-names=front-proxy-client \
		--requestheader-username-headers=X-Remote-User --requestheader-group-headers=X-Remote-Group \
		--requestheader-extra-headers-prefix=X-Remote-Extra- \
		--feature-gates=ImageVolume="$IMAGE_VOLUMES" \
		--v=1
}

start_controllers() {
	local kc=$CLUSTER_DIR/scheduler.kubeconfig
	START_CGROUP=$CONTROL_CGROUP start kube-scheduler "$K8S_BIN/kube-scheduler" --kubeconfig="$kc" \
		--authentication-kubeconfig="$kc" --authorization-kubeconfig="$kc" \
		--bind-address=127.0.0.1 --secure-port="$SCHEDULER_PORT" --leader-elect=false --v=1
	kc=$CLUSTER_DIR/controller-manager.kubeconfig
	START_CGROUP=$CONTROL_CGROUP start kube-controller-manager "$K8S_BIN/kube-controller-manager" --kubeconfig="$kc" \
		--authentication-kubeconfig="$kc" --authorization-kubeconfig="$kc" \
		--bind-address=127.0.0.1 --secure-port="$CONTROLLER_MANAGER_PORT" --leader-elect=false \
		--service-account-private-key-file="$PKI/sa.key" --root-ca-file="$PKI/ca.crt" \
		--use-service-account-credentials=true \
		--cluster-signing-cert-file="$PKI/ca.crt" --cluster-signing-key-file="$PKI/ca.key" \
		--service-cluster-ip-range="$SERVICE_CIDR" --allocate-node-cidrs=false --v=1
}

# start_containerd I: node I's containerd; for a node with a private mount
# namespace (private_ns) containerd creates it, through node-ns.sh, and so
# owns it: its shims and containers, and the kubelet that joins it, resolve
# hostPaths there.
start_containerd() {
	local i=$1 nd ns=()
	nd=$(node_dir "$i")
	mkdir -p "$nd/pod-logs"
	containerd_config "$i"
	cni_config "$i"
	if private_ns "$i"; then
		mkdir -p "$DEVICE_PLUGIN_DIR" # the mount point (host.sh removes it if it created it)
		ns=(unshare --mount --propagation slave -- "$(dirname "$0")/node-ns.sh" "$(device_plugin_dir "$i")")
	fi
	START_CGROUP=$(node_system_cgroup "$i") start "containerd$i" "${ns[@]}" containerd --config "$nd/containerd.toml"
}

# start_kubelet I: node I's kubelet, in its containerd's mount namespace.
start_kubelet() {
	local i=$1 nd ns=()
	nd=$(node_dir "$i")
	kubelet_config "$i"
	if private_ns "$i"; then
		alive "containerd$i" || die "containerd$i is not running: its mount namespace is gone"
		ns=(nsenter --mount="/proc/$(cat "$RUN/containerd$i.pid")/ns/mnt" --)
	fi
	START_CGROUP=$(node_system_cgroup "$i") start "kubelet$i" "${ns[@]}" "$K8S_BIN/kubelet" --config="$nd/kubelet.yaml" --kubeconfig="$nd/kubelet.kubeconfig" \
		--root-dir="$nd/kubelet" --cert-dir="$nd/kubelet-pki" \
		--hostname-override="$(node_name "$i")" --node-ip="$(node_ip "$i")" --v=2
}

node_ready() {
	[ "$(kubectl get node "$(node_name "$1")" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]
}

https_ok() { [ "$(curl -sk --max-time 2 "$1")" = ok ]; }
apiserver_ready() {
	[ "$(curl -s --max-time 2 --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" \
		"https://$API_IP:$API_PORT/readyz")" = ok ]
}
etcd_healthy() { curl -s --max-time 2 "http://127.0.0.1:$ETCD_PORT/health" | grep -q '"health":"true"'; }
containerd_up() { ctr --address "$(containerd_sock "$1")" version; }

ensure_default_sa() {
	kubectl get serviceaccount default >/dev/null 2>&1 || kubectl create serviceaccount default >/dev/null 2>&1
}

# write_env records what tests and scripts need to find the cluster.
write_env() {
	local i
	{
		echo "CLUSTER_DIR=$CLUSTER_DIR"
		echo "KUBECONFIG=$KUBECONFIG_ADMIN"
		echo "NODES=$NODES"
		echo "API_SERVER=https://$API_IP:$API_PORT"
		echo "SERVICE_CIDR=$SERVICE_CIDR"
		echo "IMAGE_VOLUMES=$IMAGE_VOLUMES"
		for ((i = 0; i < NODES; i++)); do
			echo "NODE${i}_NAME=$(node_name "$i")"
			echo "NODE${i}_IP=$(node_ip "$i")"
			echo "NODE${i}_POD_CIDR=$(pod_cidr "$i")"
			echo "NODE${i}_CONTAINERD=$(containerd_sock "$i")"
			echo "NODE${i}_CTR=$CONTAINERD_BIN/ctr"
			echo "NODE${i}_KUBELET_ROOT=$(node_dir "$i")/kubelet"
			echo "NODE${i}_DIR=$(node_dir "$i")"
			if private_ns "$i"; then
				echo "NODE${i}_DEVICE_PLUGINS=$(device_plugin_dir "$i")"
			else
				echo "NODE${i}_DEVICE_PLUGINS=$DEVICE_PLUGIN_DIR"
			fi
		done
	} >"$CLUSTER_DIR/cluster.env"
}

main() {
	local i state t pids
	preflight
	mkdir -p "$RUN" "$LOGS"
	state=$(running_state)
	case $state in
	up)
		echo "cluster already running"
		if [ -n "$NODES_REQUESTED" ] && ((NODES_REQUESTED != NODES)); then
			echo "  (it has $NODES node(s); for NODES=$NODES_REQUESTED run make cluster-down first)"
		fi
		report
		return 0
		;;
	partial) die "cluster in $CLUSTER_DIR is partly running: run make cluster-down first" ;;
	esac
	check_host_free
	echo "$CLUSTER_DIR" >"$HOST_MARKER"
	save_config
	host_record
	pki_all
	write_env

	for ((i = 0; i < NODES; i++)); do host_node_setup "$i"; done
	host_cpu_groups
	host_service_route
	start_etcd
	wait_for 30 etcd etcd_healthy
	log "etcd healthy"
	t=$(now)
	start_apiserver
	for ((i = 0; i < NODES; i++)); do start_containerd "$i"; done
	pids=()
	for ((i = 0; i < NODES; i++)); do
		wait_for 30 "containerd$i" containerd_up "$i"
		"$(dirname "$0")/import-images.sh" "$i" >"$LOGS/import$i.log" 2>&1 &
		pids+=($!)
	done
	for i in "${pids[@]}"; do
		wait "$i" || die "image import failed, see $LOGS/import*.log"
	done
	cat "$LOGS"/import*.log | sed 's/^/  /'
	log "containerd up on $NODES node(s), images imported"
	wait_for 60 kube-apiserver apiserver_ready
	log "kube-apiserver ready ($(printf '%.2f' "$(echo "$(now) - $t" | bc)")s after start)"
	start_controllers
	# Pods are refused until the default service account exists; the
	# controller-manager makes it only seconds after it starts.
	ensure_default_sa &
	t=$(now)
	for ((i = 0; i < NODES; i++)); do start_kubelet "$i"; done
	proxy_config
	START_CGROUP=$(node_system_cgroup 0) start kube-proxy "$K8S_BIN/kube-proxy" --config="$CLUSTER_DIR/kube-proxy.yaml" --v=1
	wait_for 30 "scheduler" https_ok "https://127.0.0.1:$SCHEDULER_PORT/healthz"
	wait_for 30 "controller-manager" https_ok "https://127.0.0.1:$CONTROLLER_MANAGER_PORT/healthz"
	log "kube-scheduler and kube-controller-manager healthy"
	for ((i = 0; i < NODES; i++)); do
		wait_for 60 "node $(node_name "$i") Ready" node_ready "$i"
		kubectl patch node "$(node_name "$i")" --type merge -p "{\"spec\":{\"podCIDR\":\"$(pod_cidr "$i")\",\"podCIDRs\":[\"$(pod_cidr "$i")\"]}}" >/dev/null
	done
	log "$NODES node(s) Ready (kubelet start -> Ready $(printf '%.2f' "$(echo "$(now) - $t" | bc)")s)"
	wait_for 30 kube-proxy curl -sf "http://127.0.0.1:$PROXY_HEALTHZ_PORT/healthz"
	wait_for 30 "default service account" ensure_default_sa
	# Every pod mounts this CA bundle; the controller-manager publishes it.
	wait_for 30 "kube-root-ca.crt in namespace default" kubectl get configmap kube-root-ca.crt
	log "cluster up"
	report
}

# Sourced by restart.sh for its start_* functions; run, it brings the cluster up.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	main "$@"
fi
