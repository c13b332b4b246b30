// Command csihostpath is the local cluster's CSI storage driver: volumes and
// snapshots kept under one directory of the host all the local cluster's
// nodes share (docs/local-cluster.md), so every volume is reachable from
// every node. It serves the CSI Identity, Controller and Node services on
// one unix socket, driven by the real kubelet and the Kubernetes CSI
// sidecars (external-provisioner, external-snapshotter), and registers
// itself with the kubelet through the plugin registration socket.
//
// The Kubernetes project's own host-path driver and its node-driver-
// registrar are not served by the module proxy this project builds from,
// so this one is written here; it exists for the local cluster and its
// tests, not for users, whose clusters bring their own storage.
//
// What it offers:
//
//   - volumes in Filesystem mode (a directory; the requested capacity is
//     recorded, not enforced) and Block mode (a sparse file of the
//     requested size, published as a loop device);
//   - every access mode, single- and multi-node, read-write and read-only:
//     the directory or file is shared through the host, which is what lets
//     a VM with a ReadWriteMany PVC migrate between the local nodes;
//   - snapshots (a sparse copy of the file or a copy of the tree, ready at
//     once) and volumes created from a snapshot or cloned from a volume;
//   - for tests, StorageClass parameter refuseSnapshots: "true", whose
//     volumes refuse every snapshot (FailedPrecondition).
//
// Layout under --root: volumes/<id>/{volume.json, data/ | disk.img},
// snapshots/<id>/{snapshot.json, data/ | disk.img}, and per node
// nodes/<node>/published/<hash of the target path>.json (which loop device
// a Block publish attached, for the unpublish that detaches it). Every
// call is idempotent, as CSI requires: a create by the same name returns
// what exists, a delete of what is gone succeeds.
//
//	csihostpath -endpoint unix:///csi/csi.sock -root /var/lib/csi-hostpath \
//	  -node-id $(NODE_NAME) [-kubelet-registration-path PATH -registration-dir DIR]
package main
