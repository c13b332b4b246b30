#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Restart one daemon of the running local cluster, as an operator would:
# SIGTERM (SIGKILL after 10 s), an optional outage, the same command line
# again, and wait until it serves.
#
#   hack/cluster/restart.sh NAME [DOWN_SECONDS]
#
# NAME is kube-apiserver, kube-controller-manager, kube-scheduler, kubeletI
# or containerdI. Containers outlive a containerd restart (their shims keep
# running); a node with a private mount namespace (I > 0) cannot restart its
# containerd, which owns that namespace.
set -euo pipefail
LOG_APPEND=1 # keep the daemon's log from before the restart
# shellcheck source=up.sh
. "$(dirname "$0")/up.sh"

restart_main() {
	local name=${1:?usage: restart.sh NAME [DOWN_SECONDS]} down=${2:-0} i
	[ "$(id -u)" = 0 ] || die "must run as root"
	alive "$name" || die "$name is not running in $CLUSTER_DIR"
	case $name in
	containerd*)
		i=${name#containerd}
		private_ns "$i" && die "$name owns node $i's mount namespace: it cannot restart alone"
		;;
	kubelet* | kube-apiserver | kube-controller-manager | kube-scheduler) ;;
	*) die "restart.sh: unknown daemon $name" ;;
	esac
	stop "$name"
	sleep "$down"
	case $name in
	kube-apiserver)
		start_apiserver
		wait_for 60 kube-apiserver apiserver_ready
		;;
	kube-controller-manager | kube-scheduler)
		# start_controllers starts both; stop the other one first.
		stop "$([ "$name" = kube-scheduler ] && echo kube-controller-manager || echo kube-scheduler)"
		start_controllers
		wait_for 30 "scheduler" https_ok "https://127.0.0.1:$SCHEDULER_PORT/healthz"
		wait_for 30 "controller-manager" https_ok "https://127.0.0.1:$CONTROLLER_MANAGER_PORT/healthz"
		;;
	kubelet*)
		i=${name#kubelet}
		start_kubelet "$i"
		wait_for 60 "node $(node_name "$i") Ready" node_ready "$i"
		;;
	containerd*)
		i=${name#containerd}
		start_containerd "$i"
		wait_for 30 "$name" containerd_up "$i"
		;;
	esac
	log "$name restarted (down ${down}s)"
}

restart_main "$@"
