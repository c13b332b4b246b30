// Package qcow2 creates empty qcow2 images and probes the disk images a
// VM starts from. The launcher creates a qcow2 overlay over every
// containerDisk (and a qcow2 emptyDisk) on each VM start; writing the few
// metadata clusters of an empty image here takes microseconds, where a
// qemu-img process costs an exec and tens of milliseconds of CPU on the
// start path, under a burst as many times over as VMs start.
//
// An image is what qemu-img create writes, in the layout of QEMU's
// docs/interop/qcow2.txt: version 3, 64 KiB clusters, 16-bit refcounts;
// cluster 0 the header (with the backing file's format as a header
// extension and its name after the extensions), cluster 1 the refcount
// table, cluster 2 its one refcount block, then the L1 table, all zero.
// QEMU allocates L2 tables and data clusters on the guest's first writes,
// and grows the refcount structures itself. Tests hold the images to
// qemu-img check and qemu-img info.
//
// Create writes under a temporary name in the target's directory and
// renames, so a failure or a crash leaves no image half-written at the
// target (the launcher keeps an existing emptyDisk image).
//
// The package holds no state and writes no status; it imports nothing
// outside the standard library.
package qcow2
