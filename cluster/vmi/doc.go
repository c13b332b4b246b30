// Package vmi is the VirtualMachineInstance controller: it renders each
// VMI's launcher pod (docs/launcher-pod.md is the contract), drives the VMI
// phase up to Scheduled and cleans pods up after deletion.
//
// # Phases (the controller writes only the left part)
//
//	""  ──► Pending ──► Scheduling ──► Scheduled ──► (node agent: Running, Succeeded, Failed)
//	          │             │  │
//	          │             │  └──► (node agent: Running, taking the VMI over
//	          │             │        before this controller's Scheduled)
//	          └─────────────┴──► Failed (reason PodFailed / PodDeleted: the pod
//	                              ended or vanished before an agent took over)
//
// Pending: no launcher pod yet. The controller creates it and, once the
// create succeeded, records Pending and Scheduling in one status write (a
// VMI stays Pending only while its pod cannot be rendered, e.g. a missing
// PVC), with status.volumeStatus: the PVC volumes' claims as the pod was
// rendered from them (access modes, volume mode, sizes), which tell the
// agent which disks are shared (ReadWriteMany). Scheduling: the pod exists but is not Running; unschedulable pods and
// image pull errors are mirrored as False conditions PodScheduled
// (Unschedulable) and Synchronized (ErrImagePull, ImagePullBackOff,
// PvcNotFound), which the VM shows as its printableStatus. Scheduled: the
// pod runs; the controller writes status.nodeName and the kubevirt.io/nodeName
// label (agents watch their VMIs through it) and from then on never writes
// the phase or the agent's conditions again. The node agent starts QEMU
// before the kubelet reports the pod running and, once QEMU runs, may take
// the VMI over first: Scheduling → Running with the node, the active pod
// and the Scheduled timestamp (node/agent/prelaunch.go). Whichever write
// comes second conflicts on the resourceVersion; for a VMI the agent took
// over, the controller only adds the node label and the finalizer, from
// status.nodeName. Every transition is appended to
// status.phaseTransitionTimestamps and observed by the histogram
// kubevirt_vmi_phase_transition_time_from_creation_seconds{phase}.
//
// # Pod shape
//
// A launcher pod is one container with the containerDisk and kernelBoot
// images as Kubernetes image volumes (ShapeImageVolumes), or the fallback
// of init and holder containers (ShapeContainers). Shapes chooses per pod
// from the configured ShapeMode, the API server's answer to
// ProbeImageVolumes (asked once per leadership) and the VM nodes' runtime
// and kubelet versions (ChooseShape, pure).
//
// # Deletion
//
// The finalizer kubevirt.io/foregroundDeleteVirtualMachine is added with the
// node label, in one write, when the launcher pod runs (the VM controller
// already sets it on VMIs it creates); a VMI deleted before that has no
// agent to wait for, and its pod is deleted as a stale one. On deletion
// the agent shuts the guest down and removes the finalizer; the VMI then
// disappears and the controller deletes its pod (any launcher pod whose
// kubevirt.io/created-by is not the current VMI's UID is deleted). If the
// VMI never reached Scheduled, or failed as NodeUnresponsive, no agent will
// act, so the controller deletes the pod and removes the finalizer itself.
//
// A pod create is remembered (expectations) until the pod informer shows
// it, so a lagging cache never yields a second pod. A VMI version this
// controller itself wrote over (the one a sync planned from, the metadata
// write before the Scheduled status) is not synced again: the write after
// it is on its way, and a sync of the older version would only earn a
// Conflict (superseded.go).
//
// # Memory overhead
//
// The compute container requests guest memory + [Overhead] (none with
// overcommitGuestOverhead; a memory limit gets the overhead added). There is
// no libvirt or virt-launcher stack in the pod, only QEMU and the launcher:
//
//	launcher                         10 MiB  (its budget)
//	QEMU base                        48 MiB  (measured 42 MiB: ~24 MiB anon heap/ROMs/
//	                                          device state + ~18 MiB binary and libs)
//	per vCPU                          1 MiB  (thread, stacks; measured < 1 MiB)
//	page tables                guest ÷ 512   (KVM EPT/shadow; 2 MiB per GiB)
//	per disk and per NIC              2 MiB  (virtqueues, block/net buffers, qcow2 L2 cache)
//	graphics (autoattach default)     8 MiB  (VGA + VNC; not measured, estimate)
//	emulation (TCG)                  64 MiB  (the agent passes -accel tcg,tb-size=64;
//	                                          measured: the cache fills to ~62 MiB at boot)
//	kernelBoot                       64 MiB  (QEMU keeps the loaded kernel and initrd as
//	                                          ROM blobs: measured 61 MiB with the Debian
//	                                          uncompressed vmlinux + busybox initrd)
//
// rounded up to a whole MiB. Measured on QEMU 7.2 (Debian 12), q35, 256 MiB
// and 1 GiB guests, 1 and 4 vCPUs, virtio-blk, virtio-net, virtio-serial:
// RSS outside the guest RAM mapping, from /proc/<pid>/smaps. A 128 MiB
// headless guest with one disk and one NIC is requested as 128 + 64 MiB
// under KVM (+ 64 MiB under TCG); KubeVirt's pod carries roughly
// 250–370 MiB over the guest for the same VM.
//
// CPU: requests vCPUs ÷ 10 unless the VMI requests cpu itself; limits are
// the VMI's. Devices: devices.kubevirt.io/kvm unless the pod runs its
// guest under emulation, devices.kubevirt.io/tun when the VMI has a NIC.
//
// Accelerator (accelerator.go; controller flag --use-emulation, ConfigMap
// key useEmulation): under "auto", the default, a pod requests
// devices.kubevirt.io/kvm when a node labelled nodevirt.io/kvm=true by its
// agent fits the VMI (selector, required affinity, taints, not cordoned);
// otherwise it runs TCG and a required node affinity keeps it off KVM
// nodes. "true" is TCG everywhere, "false" KVM only. A migration target
// pod takes its source pod's accelerator.
//
// Concurrency: one Controller serves any number of workers; the queue never
// hands one key to two workers at once. Plan and RenderPod are pure.
package vmi
