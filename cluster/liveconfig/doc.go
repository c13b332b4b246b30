// Package liveconfig keeps the controller's cluster configuration current
// while it runs. It watches the two objects the configuration comes from,
// both in the controller's namespace: the ConfigMap nodevirt-config
// (nodevirt's own keys: launcher image and pod shape, heartbeat threshold)
// and the KubeVirt resource (KubeVirt's spec.configuration field names:
// developerConfiguration, migrations, evictionStrategy, imagePullPolicy).
// On every change of either it recomputes the configuration through the
// function its owner gives it (the merge rules are the owner's, see
// cluster/controller/config.go) and swaps it in atomically.
//
// Readers call Current for each use, so a change is in force for the next
// launcher pod, migration or sync the controllers handle, with no restart;
// VMIs that run keep the pods they were started with, as KubeVirt's do.
// OnChange hooks let the owner requeue what the configuration decides for
// existing objects.
//
// A change that does not compute (a ConfigMap value that does not parse)
// is refused: the configuration in force stays, and the refusal is logged
// and recorded as a Warning event (ConfigurationRefused) on the object. A
// change that computes is logged and recorded as a Normal event
// (ConfigurationApplied). With more than one KubeVirt in the namespace the
// oldest configures the cluster and each other one gets a Warning event
// (KubeVirtIgnored), as KubeVirt allows a single one.
//
// It writes no status field: the KubeVirt resource's status belongs to
// the operator that installs nodevirt.
package liveconfig
