# The chaos harness (issue 18, e2e/chaos): a seeded schedule of faults —
# agent, launcher, QEMU and controller-leader SIGKILLs, kubelet and
# containerd restarts, a kube-apiserver outage, the agent's store filesystem
# filled up — on the first node of a two-node local cluster while VMs are
# created, paused, stopped, started and deleted, the residents' consoles
# are held open and a migrant VM is live-migrated between the nodes, with
# the invariants checked after every fault. A running one-node cluster is
# refused (make cluster-down first). make test runs a CI-sized run (20
# agent kills, one of each other fault); make chaos the full one.

.PHONY: chaos
chaos: cluster-packages cluster-binaries images ## Full chaos run on the local cluster (CHAOS_SEED, CHAOS_AGENT_KILLS default 200, CHAOS_EACH default 3); report in docs/chaos.{md,json}.
	NODEVIRT_CHAOS_SEED=$(or $(CHAOS_SEED),1) NODEVIRT_CHAOS_AGENT_KILLS=$(or $(CHAOS_AGENT_KILLS),200) \
		NODEVIRT_CHAOS_EACH=$(or $(CHAOS_EACH),3) NODEVIRT_CHAOS_REPORT=$(CURDIR)/docs \
		$(GO) test -count=1 -v -timeout 4h -run 'TestChaos' ./e2e/chaos/
