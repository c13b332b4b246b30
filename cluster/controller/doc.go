// Package controller wires nodevirt's cluster controller process: the VM,
// VMI, node and migration controllers (packages cluster/vm, cluster/vmi,
// cluster/node, cluster/migration: VMIMs, PodDisruptionBudgets, evacuation),
// the replica set and pool controllers (cluster/replicaset, cluster/pool)
// and the node API certificate signer with its CA bundle publisher
// (cluster/certsigner; on unless --ca-dir is empty) on shared informers,
// behind leader election on a coordination.k8s.io Lease, with /healthz and
// /metrics served over HTTP. --ca-dir (default /etc/nodevirt-ca, the
// mounted Secret nodevirt-ca) is read when the replica starts leading; a
// missing or invalid CA makes the leader give up the lease with an error
// naming the directory. --cert-lifetime (default 24h) bounds the issued
// certificates.
//
// Only the leader runs informers and workers; a replica that loses the
// lease exits (Run returns an error) so that its Deployment restarts it as a
// clean follower. On a clean shutdown the lease is released as soon as the
// controllers have stopped (package leader), never before: a successor must not
// work alongside a predecessor finishing a sync.
//
// Configuration (config.go): flags give defaults; the ConfigMap
// nodevirt-config in the controller's namespace overrides them with keys
// launcherImage, useEmulation ("auto", "true" or "false"),
// launcherPodShape, heartbeatThreshold (a Go duration), migrations (YAML
// with KubeVirt's migrations fields) and evictionStrategy; the KubeVirt
// resource in the same namespace overrides both with KubeVirt's
// spec.configuration fields (developerConfiguration.useEmulation,
// cpuAllocationRatio and featureGates, migrations, evictionStrategy,
// imagePullPolicy). Both are read when a replica becomes leader (an
// invalid value stops it) and then watched (cluster/liveconfig): every
// setting is live, in force for the next launcher pod, migration and sync
// (a change requeues every VMI's disruption budget and every node's
// evacuation and heartbeat check); running VMIs keep their pods.
//
// Logging: log/slog; klog (used by client-go, leader election) is routed
// into the same handler. Metrics go to the injected prometheus registry.
package controller
