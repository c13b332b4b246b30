// Package migration is nodevirt's end-to-end suite for live migration
// between nodes (acceptance scenarios 17 and 18, issue 16) on a real
// two-node local cluster (e2e/localcluster, NODES=2): real kube-apiserver,
// scheduler, two kubelets and containerds, nodevirt deployed from
// deploy/local as real pods, real QEMU guests under TCG.
//
// TestMigration brings the two-node cluster up itself (or reuses a running
// one that has two nodes or more), deploys nodevirt with
// hack/deploy-local.sh and runs the scenarios in order as subtests, each
// with its own objects in namespace nodevirt-migration that it deletes when
// done:
//
//	VMOnEachNode      a VM pinned (nodeSelector kubernetes.io/hostname) to
//	                  each node runs, boots and serves HTTP at its pod IP:
//	                  both nodes offer devices.kubevirt.io/tun (the proving
//	                  ground of issue 16)
//	RoundTrip         (17) a guest dirtying memory migrates A -> B -> A
//	Cancel            (17) deleting the VMIM mid-flight cancels it
//	AgentKilled       (17) SIGKILL of the source or target agent's host
//	                  process mid-migration: one live QEMU afterwards
//	NotMigratable     (17) a bridge-bound VMI: VMIM Failed at once, reason
//	                  named
//	Disks             (17) node-local disks (containerDisk, emptyDisk) move
//	                  with the guest
//	SharedPVC         (19) ReadWriteMany claims of the local cluster's CSI
//	                  driver (Filesystem and Block) stay where they are:
//	                  the target opens them (cache none); a ReadWriteOnce
//	                  claim is not LiveMigratable
//	Drain             (18) kubectl drain moves two LiveMigrate VMs away
//	Bench             the migration benchmark (bench_test.go): 256 MiB
//	                  guests, idle and dirtying, one migration each beside
//	                  its floor (the same guest between two bare QEMUs,
//	                  floor_test.go); NODEVIRT_MIGRATION_BENCH=full (make
//	                  bench-migration) runs 256 MiB and 1 GiB guests ten
//	                  times each and a drain of four VMs, and writes
//	                  docs/migration-benchmarks.md
//
// A scenario whose feature has not landed is listed in Pending (pending.go)
// with the missing piece and is skipped with that reason; the suite prints
// the list at the end, never skips silently.
//
// The suite measures and logs (MEASURE lines): two-node bring-up and deploy
// times, each migration's total time (VMIM created -> Succeeded, and the
// VMI's migrationState start -> end) and its downtime as the service sees
// it: the longest gap between successful HTTP probes of the guest's port
// 80, sent every 10 ms from the node to the source and target pod IPs.
//
// Prerequisites are localcluster.RequirePrereqs' (root, Kubernetes
// binaries, images): with CI=true a missing one fails the suite, otherwise
// it skips naming the make target; -short skips. The suite holds the host's
// cluster lock (localcluster.Lock) throughout. A cluster it started is
// stopped at the end (NODEVIRT_E2E_KEEP=1 keeps it); a running cluster with
// fewer than two nodes is not touched: the suite then fails under CI=true
// and skips otherwise.
package migration
