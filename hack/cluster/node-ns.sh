#!/usr/bin/env bash
# node-ns.sh DIR COMMAND...: the entry point of a node's private mount
# namespace (up.sh runs it as `unshare --mount --propagation slave -- node-ns.sh
# DIR containerd ...`): bind-mounts DIR on the kubelet's fixed device-plugin
# directory, then execs COMMAND (same pid), so that COMMAND and everything it
# starts (shims, runc, containers' bind mounts) and every process that later
# joins the namespace (that node's kubelet, by nsenter) see DIR there.
#
# Why: kubelet v1.34 hardcodes /var/lib/kubelet/device-plugins whatever its
# --root-dir; two kubelets on one host would share (and fight over) it. With
# this, the agent DaemonSet's hostPath /var/lib/kubelet/device-plugins on
# node i resolves to node i's own directory.
#
# The namespace is a slave of the host's mounts: host mounts reach it, its
# own (this bind, the kubelet's volume mounts, containerd's rootfs and netns
# mounts) never reach the host, and all of them vanish with the namespace's
# last process (cluster-down stops every one of them).
set -euo pipefail
DEVICE_PLUGIN_DIR=/var/lib/kubelet/device-plugins
dir=$1
shift
[ "$(readlink /proc/self/ns/mnt)" != "$(readlink /proc/1/ns/mnt)" ] ||
	{ echo "node-ns.sh: refusing to bind-mount in the host's mount namespace" >&2; exit 1; }
mkdir -p "$dir"
mount --bind "$dir" "$DEVICE_PLUGIN_DIR"
exec "$@"
