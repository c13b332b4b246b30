// Package launchspec defines the launch spec: the JSON document the node
// agent PUTs to the launcher in a VM's pod (docs/launcher-pod.md), and the
// paths inside that pod both sides agree on.
//
// A Spec is everything the launcher needs and nothing it has to interpret:
// QEMU's argv (after the binary name), the disk images it must prepare
// before starting QEMU (containerDisk overlays, emptyDisk images, PVC
// disk.img files, PVC block device checks), the
// grace period for SIGTERM, and a content hash.
//
// Invariants:
//   - Spec.Hash is the hex SHA-256 of the spec's JSON encoding with Hash
//     empty (see Seal and Verify). The launcher treats two specs with the
//     same hash as the same launch (PUT is idempotent) and refuses a
//     different one while QEMU runs.
//   - Every path in a Spec is absolute and as seen inside the pod (Paths).
//     The launcher refuses disk preparation targets outside its private
//     directory, except a PVC's: exactly <PVCs>/<volume>/disk.img or
//     <Block>/<volume>.
//   - This package imports nothing outside the standard library and nothing
//     of nodevirt: the launcher binary links it and must stay small. The
//     converter from a VMI lives in package convert next to it.
package launchspec
