// Package chaos is nodevirt's chaos harness on the real local cluster
// (issue 18): a seeded schedule of faults — SIGKILLs of the agent's host
// process, of a launcher and of a QEMU, of the controller leader, kubelet
// and containerd restarts, a kube-apiserver outage, the agent's store
// filesystem filled up (a tmpfs of its own on the local cluster) —
// injected into the first node while a workload runs (VMs created,
// paused, unpaused, their run strategy flipped, deleted; the residents'
// serial consoles held open through the cluster; a migrant VM
// live-migrated between the two nodes), with invariants checked after
// every fault:
//
//   - every resident VM (never a fault's target) still runs in the same
//     QEMU process, the same VMI, not rebooted, not paused;
//   - a VM whose launcher or QEMU was killed comes back (runStrategy
//     Always), and nothing else changed;
//   - the migrant's guest survives every migration, and a failed one has
//     a fault to explain it;
//   - every workload step finishes within its deadline (every create
//     Running, every delete gone: no stuck finalizer);
//   - the agent's records agree with the API server (no live record of a
//     VMI the API server calls final or does not have);
//   - at the end nothing is left: no QEMU, no live record, no mount of a
//     deleted launcher pod.
//
// This package holds what the harness computes without a cluster: the
// schedule (schedule.go, a pure function of the seed), the workload's
// statistics and the report (report.go, docs/chaos.md and
// docs/chaos.json). TestChaos (chaos_test.go) runs it: a CI-sized run
// (seeded, 20 agent kills and one of each other fault) in make test;
// make chaos runs NODEVIRT_CHAOS_AGENT_KILLS=200 and writes the report
// into docs/.
package chaos
