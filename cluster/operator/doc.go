// Package operator installs, upgrades and removes nodevirt's components
// for the KubeVirt resource (kubevirt.io/v1, one per cluster, in the
// operator's namespace), as KubeVirt's virt-operator does.
//
// Components (components.go, the one list) are multi-document manifests
// rendered from deploy/<component> when the operator's image is built. For
// a KubeVirt, [Render] resolves their placeholder images nodevirt/<binary>
// to spec.imageRegistry/<binary>:spec.imageTag (the operator's own registry
// and version when unset), sets spec.imagePullPolicy on the component
// containers, and labels every object app.kubernetes.io/managed-by:
// nodevirt-operator with annotation nodevirt.io/install-version; between
// the two, spec.infra and spec.workloads place the components' workloads
// (placement.go), spec.customizeComponents.flags become their main
// containers' arguments (flags.go) and the patches come last. Before each
// apply, certificates.go makes what is missing of the installation's TLS
// material (the node API CA Secret nodevirt-ca, its bundle ConfigMap
// nodevirt-ca-bundle, nodevirt-api's serving Secret nodevirt-api-serving,
// whose CA becomes the APIServices' caBundle); it is deleted with the
// components. The
// operator server-side applies them in order (field manager
// nodevirt-operator, forced) when the resource's generation or target
// changes, when a workload is missing, and every 5 minutes against drift.
// A changed imageTag is an upgrade: the Deployments and the agent
// DaemonSet roll by their own update strategies (the agent's is node by
// node; its restart never disturbs a VM).
//
// Sync: observe (the rendered Deployments' and DaemonSets' state from
// informer caches; while deleting, the cluster's VMs and VMIs, from
// metadata-only caches that wake the operator on a creation or deletion,
// never on a VMI's status write, and the objects still present) → [Plan]
// (pure, table-tested) → act.
//
// Status (the operator writes all of it, field manager nodevirt-operator):
// phase Deploying until every workload runs the target version and is
// available, then Deployed (it stays Deployed during later updates, as
// KubeVirt's does); targetKubeVirtVersion/-Registry, observedKubeVirtVersion
// /-Registry once rolled out, observedGeneration, operatorVersion; the
// conditions Available, Progressing and Degraded with reasons
// (AllComponentsReady, RolledOut, DeploymentInProgress, UpdateInProgress,
// ComponentsNotReady, ComponentsUnavailable, DeletionInProgress,
// DeletionBlockedByWorkloads, RemovingWorkloads).
//
// Deletion: the finalizer foregroundDeleteKubeVirt holds the resource
// (phase Deleting). While VMs or VMIs exist, spec.uninstallStrategy
// BlockUninstallIfWorkloadsExist (the default) keeps everything and says so
// in Degraded=True DeletionBlockedByWorkloads; RemoveWorkloads deletes them
// first. Then every component object but the CRDs is deleted (reverse
// order); once none is left, phase Deleted and the finalizer goes.
package operator
