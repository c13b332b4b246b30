// Package metrics exposes the per-node Prometheus metrics of the VMIs an
// agent runs, under KubeVirt's names (virt-handler's kubevirt_vmi_*), plus
// the collector's own health (nodevirt_agent_scrape_*).
//
// The Collector is a custom prometheus.Collector: it holds no values
// between scrapes. On each Collect it asks its Source for the node's VMs
// (a non-blocking snapshot) and then for every VM's statistics
// concurrently, under one deadline (Config.Timeout). A VM whose statistics
// do not arrive in time is left out of that scrape and counted in
// nodevirt_agent_scrape_timeouts_total: a scrape never waits on a stuck
// QEMU or guest agent longer than the deadline.
//
// Invariants:
//   - Every series carries the labels node, namespace and name; device
//     series add interface, drive or id/state, file systems disk_name and
//     mount_point.
//   - Network counters are from the guest's point of view (receive = what
//     the guest received); the Source does the swap from the tap's view.
//   - A statistic the Source does not know (negative memory value, nil
//     section) is not exported rather than exported as zero.
//
// Concurrency: Collect may run concurrently with itself (several
// scrapers); it shares nothing but the timeout counter. Source.Stats must
// honour ctx cancellation: goroutines still running after the deadline are
// abandoned (their results are dropped) and must end on their own.
package metrics
