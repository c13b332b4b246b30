// Package cpupin gives a VMI with spec.domain.cpu.dedicatedCpuPlacement its
// dedicated host CPUs, as KubeVirt does:
//
//   - [StaticPolicy] reads the kubelet's CPU manager state file to tell
//     whether the node hands out exclusive CPUs (policy "static"); the agent
//     reports that as the node label cpumanager=true|false, which launcher
//     pods of dedicated VMIs select.
//   - [Plan] (pure) maps vCPU threads one to one onto the CPUs of the
//     launcher container's cpuset, and, with isolateEmulatorThread, QEMU's
//     other threads onto the one CPU left over; without it they share the
//     vCPUs' CPUs.
//   - [Apply] applies a plan with sched_setaffinity(2), and [Host.Allowed] and
//     [Host.Threads] read what a plan needs from /proc.
//
// It writes no status field. The agent pins once, when it first attaches to
// a new QEMU; a restarted agent re-attaching to the same QEMU leaves the
// affinity as it is (threads keep it). Pinning is idempotent, so running it
// twice is harmless too.
//
// The container's cpuset comes from the cgroup ([Host.Allowed] reads the QEMU
// process's cpuset cgroup, falling back to its Cpus_allowed_list): under the
// static CPU manager a Guaranteed pod with whole CPUs gets exactly its
// exclusive CPUs there. A cpuset smaller than the plan needs (no static CPU
// manager, or a pod that is not Guaranteed) is an error naming both
// numbers; the VM keeps running unpinned.
package cpupin
