#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Stop the local cluster (make cluster-down) and undo what up.sh did to the
# host: processes (by recorded pid), mounts under the state dir, links,
# iptables/nftables chains and tables, cgroups, sysctls, host directories.
# Only processes this cluster started are signalled. pki/, logs/ and the
# containerd image store stay in $CLUSTER_DIR (PURGE=1 removes the directory).
set -uo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=host.sh
. "$(dirname "$0")/host.sh"

[ "$(id -u)" = 0 ] || die "must run as root"

# drain_pods lets the kubelets tear pods down properly (CNI DEL, unmounts)
# while everything runs. The controllers go first so nothing recreates pods.
drain_pods() {
	local i ok=1
	alive kube-apiserver || return 0
	for ((i = 0; i < NODES; i++)); do alive "kubelet$i" || ok=0; done
	((ok)) || return 0
	stop kube-controller-manager
	stop kube-scheduler
	kubectl delete pods --all -A --grace-period=1 --wait=false >/dev/null 2>&1
	for ((i = 0; i < 300; i++)); do
		[ -z "$(kubectl get pods -A --no-headers 2>/dev/null)" ] && break
		sleep 0.2
	done
}

# kill_containers removes whatever the kubelets left behind.
kill_containers() {
	local i t c left
	for ((i = 0; i < NODES; i++)); do
		alive "containerd$i" || continue
		for t in $(ctr_node "$i" tasks ls -q 2>/dev/null); do ctr_node "$i" tasks kill -s SIGKILL "$t" >/dev/null 2>&1; done
		for ((c = 0; c < 50; c++)); do
			left=$(ctr_node "$i" tasks ls -q 2>/dev/null | wc -l)
			for t in $(ctr_node "$i" tasks ls -q 2>/dev/null); do ctr_node "$i" tasks delete -f "$t" >/dev/null 2>&1; done
			((left == 0)) && break
			sleep 0.1
		done
		for c in $(ctr_node "$i" containers ls -q 2>/dev/null); do
			ctr_node "$i" containers delete "$c" >/dev/null 2>&1
			# CNI result caches of sandboxes that never saw a CNI DEL
			rm -f /var/lib/cni/results/*-"$c"-* 2>/dev/null
		done
	done
}

# kill_shims stops containerd shims still serving one of our containerds.
kill_shims() {
	local pid
	for pid in $(cluster_pids); do
		{ tr '\0' ' ' <"/proc/$pid/cmdline"; } 2>/dev/null | grep -q '^[^ ]*containerd-shim' || continue
		kill -9 "$pid" 2>/dev/null && echo "killed leftover shim $pid"
	done
}

unmount_all() {
	local m
	# deepest first; lazily, so a busy mount cannot stall teardown
	awk -v p="$CLUSTER_DIR/" 'index($5, p) == 1 {print $5}' /proc/self/mountinfo | sort -r | while read -r m; do
		umount -l "$m" 2>/dev/null || echo "cluster: cannot unmount $m" >&2
	done
}

# detach_loops detaches the loop devices over files of the cluster (Block
# volumes: the CSI driver's, and the kubelet's own over its publish paths)
# that an interrupted teardown left bound.
detach_loops() {
	local dev file
	command -v losetup >/dev/null || return 0
	losetup -l -n -O NAME,BACK-FILE 2>/dev/null | while read -r dev file; do
		case $file in "$CLUSTER_DIR"/*) losetup -d "$dev" 2>/dev/null && echo "detached $dev ($file)" ;; esac
	done
}

cleanup_iptables() {
	local ipt tbl r c
	[ -x "$K8S_BIN/kube-proxy" ] && "$K8S_BIN/kube-proxy" --cleanup >/dev/null 2>&1
	for ipt in iptables ip6tables; do
		command -v "$ipt" >/dev/null || continue
		for tbl in nat filter mangle raw; do
			"$ipt" -w -t "$tbl" -S 2>/dev/null | grep -E '^-A .* -j (KUBE|CNI)-' | sed 's/^-A/-D/' |
				while read -r r; do eval "$ipt" -w -t "$tbl" "$r" 2>/dev/null; done
			for c in $("$ipt" -w -t "$tbl" -S 2>/dev/null | awk '/^-N (KUBE|CNI)-/ {print $2}'); do
				"$ipt" -w -t "$tbl" -F "$c" 2>/dev/null
			done
			for c in $("$ipt" -w -t "$tbl" -S 2>/dev/null | awk '/^-N (KUBE|CNI)-/ {print $2}'); do
				"$ipt" -w -t "$tbl" -X "$c" 2>/dev/null
			done
		done
	done
}

main() {
	local i left
	drain_pods
	log "pods drained"
	stop kube-proxy
	for ((i = 0; i < NODES; i++)); do stop "kubelet$i"; done
	stop kube-controller-manager
	stop kube-scheduler
	stop kube-apiserver
	stop etcd
	kill_containers
	for ((i = 0; i < NODES; i++)); do stop "containerd$i" 20; done
	kill_shims
	log "processes stopped"
	unmount_all
	detach_loops
	for ((i = 0; i < NODES; i++)); do
		ip link delete "$(cni_bridge "$i")" 2>/dev/null && echo "removed link $(cni_bridge "$i")"
	done
	# only after our own cluster-up: another Kubernetes' chains are not ours
	[ -f "$HOST/recorded" ] && cleanup_iptables
	host_restore
	[ -f "$HOST_MARKER" ] && [ "$(cat "$HOST_MARKER")" = "$CLUSTER_DIR" ] && rm -f "$HOST_MARKER"
	# runtime state; pki/, logs/ and the image store are kept
	for ((i = 0; i < NODES; i++)); do
		rm -rf "$(node_dir "$i")"/{kubelet,kubelet-pki,run,pod-logs,cni/ipam,containerd/state,containerd*.sock,device-plugins}
	done
	rm -rf "$CLUSTER_DIR/etcd" "$CLUSTER_DIR/csi" "$RUN" "$CLUSTER_DIR/cluster.env" "$CLUSTER_DIR/config.env"
	[ "${PURGE:-0}" = 1 ] && rm -rf "$CLUSTER_DIR" && echo "removed $CLUSTER_DIR"
	left=$(cluster_pids | tr '\n' ' ')
	[ -z "$left" ] || die "processes still running from $CLUSTER_DIR: $left"
	log "cluster down"
}

main "$@"
