# shellcheck shell=bash
# Host state the cluster changes, recorded before the change and undone by
# down.sh. Sourced after lib.sh. Records live in $HOST:
#   sysctl.orig   KEY=VALUE of SYSCTLS before the first start
#   nft.orig      nftables tables before the first start
#   dirs.orig     which host directories containerd/CNI may create existed
#   links         links we created (node-IP bridges)
#   cgroups       cgroup directories we created (the per-node cgroup roots)

# Host directories containerd, the CNI plugins and the kubelet create outside
# our state dir, children first. The kubelet keeps its device-plugin socket
# in /var/lib/kubelet/device-plugins whatever its --root-dir.
HOST_DIRS=(/run/containerd/s /run/containerd /var/lib/cni/results /var/lib/cni
	/var/lib/kubelet/device-plugins /var/lib/kubelet)
DEVICE_PLUGIN_DIR=/var/lib/kubelet/device-plugins

host_record() {
	local s v d
	mkdir -p "$HOST"
	[ -f "$HOST/recorded" ] && return 0
	: >"$HOST/sysctl.orig"
	for s in "${SYSCTLS[@]}"; do
		v=$(sysctl -n "$s" 2>/dev/null) && echo "$s=$v" >>"$HOST/sysctl.orig"
	done
	nft list tables >"$HOST/nft.orig" 2>/dev/null || true
	: >"$HOST/dirs.orig"
	for d in "${HOST_DIRS[@]}"; do
		[ -d "$d" ] && echo "$d" >>"$HOST/dirs.orig"
	done
	touch "$HOST/links" "$HOST/cgroups" "$HOST/recorded"
}

# host_node_setup I: node I's agent store filesystem, its host-only bridge
# with the node IP (no dummy links in this kernel; the kubelet refuses a
# loopback node IP) and its cgroup root in every cgroup v1 hierarchy.
host_node_setup() {
	local i=$1 br ip h cg sd
	# The agent's store (its bbolt file, socket, keys) on a filesystem of
	# its own, a 64 MiB tmpfs, so the chaos harness can fill it without
	# touching the host's disk; down.sh unmounts it with everything under
	# the state directory.
	sd=$(node_dir "$i")/nodevirt
	mkdir -p "$sd"
	mountpoint -q "$sd" || mount -t tmpfs -o size=64m,mode=0700 nodevirt-store "$sd"
	br=$(node_bridge "$i") ip=$(node_ip "$i")
	if ! ip link show "$br" >/dev/null 2>&1; then
		ip link add "$br" type bridge
		echo "$br" >>"$HOST/links"
	fi
	ip addr replace "$ip/32" dev "$br"
	ip link set "$br" up
	for h in /sys/fs/cgroup/*/; do
		h=${h%/}
		[ -L "$h" ] && continue # co-mounted alias (e.g. cpu -> cpu,cpuacct)
		cg=$h/$(cgroup_name "$i")
		[ -d "$cg" ] || echo "$cg" >>"$HOST/cgroups"
		# the kubelet checks that its cgroup root exists in the v1
		# hierarchies; in the (empty) v2 tree of the hybrid layout it
		# creates what it needs itself
		[ "$(basename "$h")" = unified ] && continue
		mkdir -p "$cg"
		if [ -f "$cg/cpuset.cpus" ]; then
			[ -n "$(cat "$cg/cpuset.cpus")" ] || cat "$h/cpuset.cpus" >"$cg/cpuset.cpus"
			[ -n "$(cat "$cg/cpuset.mems")" ] || cat "$h/cpuset.mems" >"$cg/cpuset.mems"
		fi
	done
}

# host_cpu_groups: the cpu cgroups the cluster's daemons run in (start's
# START_CGROUP). On a real node systemd keeps the kubelet and containerd in
# system.slice, one entity of weight 1024 beside kubepods (weight of the
# node's allocatable CPU), and the control plane runs elsewhere. Started
# from a shell in the root cgroup instead, each daemon thread (apiserver,
# etcd, kubelet, containerd, every runc) weighed as much as the node's whole
# cgroup root, so under load every pod (QEMU, the agent, the launchers) got
# a few per cent of the CPU. Here the control plane shares one cgroup and
# each node's daemons another under the node's root, beside kubepods.
host_cpu_groups() {
	local i cg
	[ -d "$CPU_CGROUP" ] && [ -f "$CPU_CGROUP/cpu.shares" ] || return 0 # no cgroup v1 cpu hierarchy
	cg=$CPU_CGROUP/$CONTROL_CGROUP
	if [ ! -d "$cg" ]; then
		echo "$cg" >>"$HOST/cgroups"
		mkdir "$cg"
	fi
	for ((i = 0; i < NODES; i++)); do
		mkdir -p "$CPU_CGROUP/$(node_system_cgroup "$i")" # removed with the node's root
	done
}

# host_service_route: Service IPs route to a host-only bridge without ports,
# so that a connection kube-proxy has not (yet) translated to a pod fails on
# this host instead of following the default route off the machine. The
# kube-apiserver dials a new APIService's ClusterIP the moment it exists,
# often before kube-proxy wrote its rules; over the default route that
# connection reached whatever answers port 443 upstream, and the aggregator
# kept it alive, so its discovery checks got that host's 404 for minutes.
# A route is needed (not an unreachable one): a local connect looks the
# route up before kube-proxy's DNAT, which then routes to the pod.
host_service_route() {
	local br
	br=$(svc_bridge)
	if ! ip link show "$br" >/dev/null 2>&1; then
		ip link add "$br" type bridge
		echo "$br" >>"$HOST/links"
	fi
	ip link set "$br" up
	ip route replace "$SERVICE_CIDR" dev "$br"
}

# nft_table_empty FAMILY NAME: the table holds chains but no rules.
nft_table_empty() {
	nft list table "$1" "$2" 2>/dev/null | awk '
		/^[ \t]*(table|chain) .*\{$/ || /^[ \t]*\}$/ || /^[ \t]*type .* hook / || /^[ \t]*$/ { next }
		{ found = 1 }
		END { exit found }'
}

host_restore() {
	local l cg fam tbl d
	[ -d "$HOST" ] || return 0
	while read -r l; do
		[ -n "$l" ] && ip link delete "$l" 2>/dev/null && echo "removed link $l"
	done <"$HOST/links"
	while read -r cg; do
		[ -d "$cg" ] && find "$cg" -depth -type d -exec rmdir {} + 2>/dev/null
		[ -d "$cg" ] && echo "cluster: cgroup $cg still in use" >&2
	done <"$HOST/cgroups"
	if [ -f "$HOST/nft.orig" ]; then
		nft list tables 2>/dev/null | while read -r _ fam tbl; do
			grep -qx "table $fam $tbl" "$HOST/nft.orig" && continue
			nft_table_empty "$fam" "$tbl" && nft delete table "$fam" "$tbl" && echo "removed nftables table $fam $tbl"
		done
	fi
	# A device-plugin dir we created holds only our kubelets' and plugins'
	# sockets and the kubelet's checkpoint.
	if [ -d "$DEVICE_PLUGIN_DIR" ] && ! grep -qx "$DEVICE_PLUGIN_DIR" "$HOST/dirs.orig"; then
		find "$DEVICE_PLUGIN_DIR" -mindepth 1 -maxdepth 1 \( -type s -o -name kubelet_internal_checkpoint \) -delete
	fi
	# containerd 2.x shims always put their ttrpc sockets in /run/containerd/s,
	# whatever containerd's own state dir; a killed shim leaves its socket.
	# In a /run/containerd we created (no containerd of the host's own ran
	# before), every socket there is one of ours.
	if [ -d /run/containerd/s ] && ! grep -qx /run/containerd "$HOST/dirs.orig"; then
		find /run/containerd/s -mindepth 1 -maxdepth 1 -type s -delete
	fi
	for d in "${HOST_DIRS[@]}"; do
		[ -d "$d" ] && ! grep -qx "$d" "$HOST/dirs.orig" && rmdir "$d" 2>/dev/null && echo "removed $d"
	done
	if [ -f "$HOST/sysctl.orig" ]; then
		sysctl -q -p "$HOST/sysctl.orig" 2>/dev/null || sysctl -q -e -p "$HOST/sysctl.orig" || true
	fi
	rm -rf "$HOST"
}
