// Package rbac holds no code: the directory is the kustomize base of the
// KubeVirt API's user-facing ClusterRoles (kustomization.yaml says which and
// why), and this package is where their tests live.
//
// The unit tests load the manifests the way kustomize renders this
// directory (every resource the kustomization lists, in order) and check
// them rule by rule against what KubeVirt v1.6.0 grants: who may read guest
// data, open a console or VNC, run lifecycle actions, migrate. The
// integration test creates them in a real kube-apiserver and asks it,
// through SubjectAccessReviews, what a user bound to each role in one
// namespace may do there and elsewhere, and checks that the server's
// built-in view/edit/admin roles select the aggregation labels.
package rbac
