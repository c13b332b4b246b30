# shellcheck shell=bash
# The variables set here are read by the scripts that source this file:
# shellcheck disable=SC2034
# Shared configuration and helpers of the local cluster scripts (up.sh,
# down.sh, import-images.sh). Sourced, never run.
#
# Everything is configurable through the environment; the defaults avoid the
# usual ports and ranges so the cluster can live next to other software.
# cluster-up saves the settings in $CLUSTER_DIR/config.env; while that file
# exists (until cluster-down) they win over the environment, so every script
# sees the configuration the cluster was started with.
#
#   CLUSTER_DIR        state directory (default <repo>/.cluster); pki/, logs/
#                      and the image stores survive cluster-down, the rest not;
#                      node I lives in nodes/<name of node I>/
#   NODES              number of nodes (default 1)
#   NODE_PREFIX        node names are NODE_PREFIX0, NODE_PREFIX1, ... (nodevirt-node)
#   NODE_NET           node i gets host-only IP NODE_NET.(i+1)/32 (10.199.0)
#   POD_NET            node i gets pod CIDR POD_NET.i.0/24 (10.244)
#   SERVICE_CIDR       Service range, a /16 (10.96.0.0/16)
#   LINK_PREFIX        host bridges LINK_PREFIXnodeI and LINK_PREFIXcniI (nv-)
#   API_PORT           kube-apiserver on node 0's IP (36443)
#   ETCD_PORT          etcd client port on 127.0.0.1; peer is +1 (32379)
#   KUBELET_PORT       kubelet on each node IP (30250); healthz on
#                      127.0.0.1:KUBELET_HEALTHZ_PORT+i (30260)
#   SCHEDULER_PORT, CONTROLLER_MANAGER_PORT, PROXY_HEALTHZ_PORT, PROXY_METRICS_PORT
#                      127.0.0.1 ports (30259, 30257, 30256, 30255)
#   K8S_BIN            Kubernetes binaries ($NODEVIRT_OUT/k8s/bin)
#   CONTAINERD_BIN     containerd 2.1 (containerd, its runc shim, ctr) built by
#                      hack/build-containerd.sh ($NODEVIRT_OUT/containerd/bin);
#                      first on PATH, so every script and the shims use it
#   IMAGE_VOLUMES      true (default): the ImageVolume feature gate is on in the
#                      kube-apiserver and the kubelets (launcher pods get
#                      their one-container shape); false: off
#   IMAGES_DIR         image archives to import ($NODEVIRT_OUT/images)

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CLUSTER_DIR=${CLUSTER_DIR:-$REPO_ROOT/.cluster}
CLUSTER_DIR=$(mkdir -p "$CLUSTER_DIR" && cd "$CLUSTER_DIR" && pwd)
NODES_REQUESTED=${NODES:-} # empty: the caller did not ask for a node count
# shellcheck source=/dev/null
[ -f "$CLUSTER_DIR/config.env" ] && . "$CLUSTER_DIR/config.env"
NODEVIRT_OUT=${NODEVIRT_OUT:-$REPO_ROOT/_output}
NODES=${NODES:-1}
NODE_PREFIX=${NODE_PREFIX:-nodevirt-node}
NODE_NET=${NODE_NET:-10.199.0}
POD_NET=${POD_NET:-10.244}
SERVICE_CIDR=${SERVICE_CIDR:-10.96.0.0/16}
LINK_PREFIX=${LINK_PREFIX:-nv-}
API_PORT=${API_PORT:-36443}
ETCD_PORT=${ETCD_PORT:-32379}
KUBELET_PORT=${KUBELET_PORT:-30250}
KUBELET_HEALTHZ_PORT=${KUBELET_HEALTHZ_PORT:-30260}
SCHEDULER_PORT=${SCHEDULER_PORT:-30259}
CONTROLLER_MANAGER_PORT=${CONTROLLER_MANAGER_PORT:-30257}
PROXY_HEALTHZ_PORT=${PROXY_HEALTHZ_PORT:-30256}
PROXY_METRICS_PORT=${PROXY_METRICS_PORT:-30255}
K8S_BIN=${K8S_BIN:-$NODEVIRT_OUT/k8s/bin}
CONTAINERD_BIN=${CONTAINERD_BIN:-$NODEVIRT_OUT/containerd/bin}
IMAGE_VOLUMES=${IMAGE_VOLUMES:-true}
PATH=$CONTAINERD_BIN:$PATH
IMAGES_DIR=${IMAGES_DIR:-$NODEVIRT_OUT/images}
CNI_BIN=${CNI_BIN:-/usr/lib/cni}

# One cluster per host: the kubelet cgroups, kube-proxy chains and sysctls are
# host-wide. The marker names the state directory of the running cluster.
HOST_MARKER=/run/nodevirt-cluster

PKI=$CLUSTER_DIR/pki
LOGS=$CLUSTER_DIR/logs
RUN=$CLUSTER_DIR/run       # pid files and sockets
HOST=$CLUSTER_DIR/host     # host state recorded at the first up (restored by down)
KUBECONFIG_ADMIN=$CLUSTER_DIR/kubeconfig
SERVICE_IP=${SERVICE_CIDR%.*/*}.1
API_IP=$NODE_NET.1

node_name() { echo "$NODE_PREFIX$1"; }
node_ip() { echo "$NODE_NET.$(($1 + 1))"; }
node_dir() { echo "$CLUSTER_DIR/nodes/$(node_name "$1")"; }
pod_cidr() { echo "$POD_NET.$1.0/24"; }
node_bridge() { echo "${LINK_PREFIX}node$1"; }
cni_bridge() { echo "${LINK_PREFIX}cni$1"; }
svc_bridge() { echo "${LINK_PREFIX}svc"; }
containerd_sock() { echo "$(node_dir "$1")/containerd.sock"; }
cgroup_name() { node_name "$1"; }

# The cpu controller's v1 hierarchy and the cpu cgroups of the cluster's
# daemons (host_cpu_groups): the control plane's, and each node's system
# cgroup beside the kubelet's kubepods, as systemd's system.slice is on a
# real node.
CPU_CGROUP=/sys/fs/cgroup/cpu
CONTROL_CGROUP=nodevirt-control
node_system_cgroup() { echo "$(cgroup_name "$1")/system"; }

# Node 0 lives in the host's mount namespace (a one-node cluster is exactly
# that); node i >= 1 runs its containerd and kubelet in a mount namespace of
# its own, where its device_plugin_dir is bind-mounted on the kubelet's fixed
# /var/lib/kubelet/device-plugins (node-ns.sh).
private_ns() { (($1 > 0)); }
device_plugin_dir() { echo "$(node_dir "$1")/device-plugins"; }

kubectl() { "$K8S_BIN/kubectl" --kubeconfig "$KUBECONFIG_ADMIN" "$@"; }
ctr_node() {
	local i=$1
	shift
	ctr --address "$(containerd_sock "$i")" -n k8s.io "$@"
}

# save_config writes the settings cluster-up used (see the top).
save_config() {
	local v
	for v in NODES NODE_PREFIX NODE_NET POD_NET SERVICE_CIDR LINK_PREFIX API_PORT ETCD_PORT \
		KUBELET_PORT KUBELET_HEALTHZ_PORT SCHEDULER_PORT CONTROLLER_MANAGER_PORT \
		PROXY_HEALTHZ_PORT PROXY_METRICS_PORT NODEVIRT_OUT K8S_BIN CONTAINERD_BIN IMAGE_VOLUMES \
		IMAGES_DIR CNI_BIN; do
		printf '%s=%q\n' "$v" "${!v}"
	done >"$CLUSTER_DIR/config.env"
}

now() { date +%s.%N; }
T0=$(now)
log() { printf '[%6.2fs] %s\n' "$(echo "$(now) - $T0" | bc)" "$*"; }
die() { echo "cluster: $*" >&2; exit 1; }

# wait_for SECONDS DESCRIPTION COMMAND...: poll COMMAND every 0.1 s.
wait_for() {
	local timeout=$1 what=$2 deadline
	shift 2
	deadline=$(echo "$(now) + $timeout" | bc)
	until "$@" >/dev/null 2>&1; do
		(($(echo "$(now) > $deadline" | bc))) && die "timed out after ${timeout}s waiting for $what (logs: $LOGS)"
		sleep 0.1
	done
}

# alive NAME: the process recorded in run/NAME.pid still runs and is ours
# (its command line names the state directory; guards against pid reuse).
alive() {
	local f=$RUN/$1.pid pid
	[ -f "$f" ] || return 1
	pid=$(cat "$f")
	{ tr '\0' ' ' <"/proc/$pid/cmdline"; } 2>/dev/null | grep -qF "$CLUSTER_DIR"
}

# running PID: the process exists and is not a zombie (our daemons are
# orphans; whoever adopted them may reap them late).
running() {
	local stat
	stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	stat=${stat##*) }
	[ "${stat%% *}" != Z ]
}

# start NAME COMMAND...: run COMMAND in its own session (so signals to make or
# a test's process group don't reach it), output to logs/NAME.log (appended
# to with LOG_APPEND=1, as restart.sh does, so a restart keeps what came
# before). With START_CGROUP set (a cpu cgroup host_cpu_groups made, e.g.
# nodevirt-control), COMMAND and its children run in it.
start() {
	local name=$1 cg=""
	shift
	[ -n "${START_CGROUP:-}" ] && [ -d "$CPU_CGROUP/$START_CGROUP" ] && cg=$CPU_CGROUP/$START_CGROUP
	if [ -n "$cg" ]; then
		# the shell joins the cgroup, then becomes COMMAND (same pid)
		# shellcheck disable=SC2016 # expanded by that shell, not this one
		set -- sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$cg" "$@"
	fi
	if [ "${LOG_APPEND:-0}" = 1 ]; then
		echo "=== restarted $(date -u +%FT%TZ)" >>"$LOGS/$name.log"
		setsid "$@" </dev/null >>"$LOGS/$name.log" 2>&1 &
	else
		setsid "$@" </dev/null >"$LOGS/$name.log" 2>&1 &
	fi
	echo $! >"$RUN/$name.pid"
}

# stop NAME [SECONDS]: SIGTERM the recorded process, SIGKILL after SECONDS.
stop() {
	local name=$1 timeout=${2:-10} pid i t
	t=$(now)
	if ! alive "$name"; then
		rm -f "$RUN/$name.pid"
		return 0
	fi
	pid=$(cat "$RUN/$name.pid")
	kill "$pid" 2>/dev/null || true
	for ((i = 0; i < timeout * 20; i++)); do
		running "$pid" || break
		sleep 0.05
	done
	running "$pid" && kill -9 "$pid" 2>/dev/null
	rm -f "$RUN/$name.pid"
	printf 'stopped %s (%s) in %.1fs\n' "$name" "$pid" "$(echo "$(now) - $t" | bc)"
}

# cluster_pids: every live process whose command line names the state
# directory (daemons, containerd shims of our containerd instances).
cluster_pids() {
	local p
	for p in /proc/[0-9]*; do
		[ "${p#/proc/}" = "$$" ] && continue
		{ tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null | grep -qF "$CLUSTER_DIR/" && echo "${p#/proc/}"
	done
	return 0
}

# The host-wide settings the kubelet, CNI and kube-proxy change.
SYSCTLS=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops
	kernel.keys.root_maxkeys kernel.keys.root_maxbytes net.ipv4.ip_forward
	net.ipv4.conf.all.forwarding net.ipv4.conf.all.route_localnet
	net.ipv6.conf.all.forwarding net.netfilter.nf_conntrack_max
	net.bridge.bridge-nf-call-iptables net.bridge.bridge-nf-call-ip6tables)
