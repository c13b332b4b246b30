# shellcheck shell=bash
# Writers of the per-node containerd, CNI and kubelet configurations and the
# kube-proxy configuration. Sourced by up.sh after lib.sh.

# containerd_config I: node I's containerd 2.1 (config version 3), isolated
# from any system containerd: own root, state, sockets, runc root, CNI config
# and netns dir.
containerd_config() {
	local i=$1 nd
	nd=$(node_dir "$i")
	cat >"$nd/containerd.toml" <<EOT
version = 3
root = "$nd/containerd/root"
state = "$nd/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.blockfile", "io.containerd.snapshotter.v1.erofs"]

[grpc]
  address = "$(containerd_sock "$i")"

[ttrpc]
  address = "$nd/containerd-ttrpc.sock"

[plugins]
  [plugins."io.containerd.internal.v1.opt"]
    path = "$nd/containerd/opt"

  # NRI would listen on the host-wide /var/run/nri/nri.sock.
  [plugins."io.containerd.nri.v1.nri"]
    disable = true

  [plugins."io.containerd.cri.v1.images"]
    snapshotter = "overlayfs"
    [plugins."io.containerd.cri.v1.images".pinned_images]
      sandbox = "nodevirt.local/pause:dev"

  [plugins."io.containerd.cri.v1.runtime"]
    enable_selinux = false
    enable_cdi = false
    # Root lacks CAP_SYS_RESOURCE on these machines, so the negative
    # oom_score_adj containerd gives sandboxes fails every runc create
    # ("can't get final child's PID from pipe: EOF"). Clamp it instead.
    restrict_oom_score_adj = true
    # Pod network namespaces under our state dir, not /var/run/netns.
    netns_mounts_under_state_dir = true
    # Block volumes (volumeDevices) are owned by the pod's runAsUser/
    # runAsGroup instead of the host node's root:disk, so the unprivileged
    # launcher (uid 107) can open a block-mode PVC (KubeVirt asks the same).
    device_ownership_from_security_context = true
    [plugins."io.containerd.cri.v1.runtime".containerd]
      default_runtime_name = "runc"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
          SystemdCgroup = false
          Root = "$nd/run/runc"
    [plugins."io.containerd.cri.v1.runtime".cni]
      bin_dirs = ["$CNI_BIN"]
      conf_dir = "$nd/cni/net.d"
EOT
}

# cni_config I: a bridge with the node's pod CIDR. No masquerading: traffic
# never leaves the machine, and pod-to-pod traffic across nodes keeps the pod
# IPs (both bridges are in the host's network namespace, so the host routes
# between the pod CIDRs by itself).
cni_config() {
	local i=$1 nd
	nd=$(node_dir "$i")
	mkdir -p "$nd/cni/net.d"
	cat >"$nd/cni/net.d/10-nodevirt.conflist" <<EOT
{
  "cniVersion": "0.4.0",
  "name": "nodevirt-pods",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$(cni_bridge "$i")",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$nd/cni/ipam",
        "ranges": [[{"subnet": "$(pod_cidr "$i")", "gateway": "$POD_NET.$i.1"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOT
}

# kubelet_config I: cgroup v1 + cgroupfs, a cgroup root per node, no image
# GC (images are imported, never pulled), no cluster DNS (there is none),
# container restarts backed off 2 s at most (the chaos harness SIGKILLs the
# agent hundreds of times; the default backoff grows to 5 min).
kubelet_config() {
	local i=$1 nd
	nd=$(node_dir "$i")
	cat >"$nd/kubelet.yaml" <<EOT
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $(node_ip "$i")
port: $KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $((KUBELET_HEALTHZ_PORT + i))
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $PKI/ca.crt}
authorization:
  mode: Webhook
tlsCertFile: $PKI/kubelet$i-serving.crt
tlsPrivateKeyFile: $PKI/kubelet$i-serving.key
containerRuntimeEndpoint: unix://$(containerd_sock "$i")
cgroupDriver: cgroupfs
cgroupRoot: /$(cgroup_name "$i")
failCgroupV1: false
failSwapOn: false
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
podLogsDir: $nd/pod-logs
registerNode: true
serializeImagePulls: false
featureGates:
  ImageVolume: $IMAGE_VOLUMES
  KubeletCrashLoopBackOffMax: true
crashLoopBackOff: {maxContainerRestartPeriod: 2s}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%
  imagefs.available: 1%
  nodefs.inodesFree: 1%
EOT
}

# proxy_config: one kube-proxy serves every node (they share the host's
# network namespace, and two would fight over the same iptables chains).
proxy_config() {
	cat >"$CLUSTER_DIR/kube-proxy.yaml" <<EOT
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $CLUSTER_DIR/kube-proxy.kubeconfig}
hostnameOverride: $(node_name 0)
mode: iptables
clusterCIDR: $POD_NET.0.0/16
bindAddress: $API_IP
healthzBindAddress: 127.0.0.1:$PROXY_HEALTHZ_PORT
metricsBindAddress: 127.0.0.1:$PROXY_METRICS_PORT
nodePortAddresses: [$NODE_NET.0/24]
iptables: {localhostNodePorts: false}
conntrack:
  maxPerCore: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
EOT
}
