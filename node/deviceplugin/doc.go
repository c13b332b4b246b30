// Package deviceplugin offers host device nodes to unprivileged pods through
// the kubelet's device plugin API (v1beta1): devices.kubevirt.io/kvm,
// devices.kubevirt.io/tun and devices.kubevirt.io/vhost-net. A launcher pod
// that requests one unit of such a resource gets the device node (rw, mknod
// allowed in its device cgroup) without any privilege or hostPath.
//
// One Plugin serves one resource. It listens on its own unix socket in the
// kubelet's device-plugin directory, registers through kubelet.sock there,
// and advertises Config.Count identical, healthy devices. Every allocation
// hands out the same device node: a device node is shareable, the count
// only caps how many containers may hold one.
//
// The directory is /var/lib/kubelet/device-plugins on every node: kubelet
// v1.34 hardcodes it and ignores --root-dir for it, so a DaemonSet mounts
// exactly that host path. Two kubelets on one host (the multi-node local
// cluster) would share it; the local cluster gives every node but the first
// a mount namespace of its own in which a per-node directory is mounted on
// that path (docs/local-cluster.md).
//
// Invariants:
//   - The plugin re-registers whenever the kubelet restarts. A starting
//     kubelet deletes every socket in the directory and recreates
//     kubelet.sock; the plugin polls both (Config.PollInterval) and, when
//     its own socket is gone or kubelet.sock is a different file, serves a
//     fresh socket and registers again.
//   - A device whose node disappears from the host is reported Unhealthy
//     on the open ListAndWatch streams, and Healthy again when it returns.
//   - On ctx cancellation Run stops the gRPC server and removes its socket;
//     it never removes anything else.
//
// Which devices a node offers is decided once, at start, by HostDevices:
// tun and vhost-net where their device nodes exist, kvm only where KVM is
// usable for ordinary guests (the caller decides, with
// node/launchspec/convert.DetectKVM: a /dev/kvm backed by kvm_pvm is not).
//
// Concurrency: Run may be called once per Plugin. The gRPC handlers run
// concurrently and share only immutable state.
package deviceplugin
