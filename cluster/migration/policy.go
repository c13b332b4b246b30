package migration

import (
	"fmt"

	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"

	migrationsv1alpha1 "github.com/nodevirt/nodevirt/cluster/api/migrations/v1alpha1"
	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	mlisters "github.com/nodevirt/nodevirt/cluster/client/listers/migrations/v1alpha1"
)

// Policies resolves the MigrationPolicy of a VMI from informer caches.
type Policies struct {
	Policies   mlisters.MigrationPolicyLister
	Namespaces corelisters.NamespaceLister
}

// Resolve returns the cluster configuration overridden by the VMI's
// policy, if one matches. A VMI's namespace missing from the cache is an
// error (the cache lags behind a new namespace): matching without its
// labels could pick a broader policy than the one that applies.
func (p *Policies) Resolve(vmi *v1.VirtualMachineInstance, cluster v1.MigrationConfiguration) (v1.MigrationConfiguration, error) {
	list, err := p.Policies.List(labels.Everything())
	if err != nil {
		return cluster, fmt.Errorf("list migration policies: %w", err)
	}
	if len(list) == 0 {
		return cluster, nil
	}
	ns, err := p.Namespaces.Get(vmi.Namespace)
	if err != nil {
		return cluster, fmt.Errorf("namespace %s of vmi %s for its migration policy: %w", vmi.Namespace, vmi.Name, err)
	}
	return ApplyPolicy(cluster, MatchPolicy(list, vmi.Labels, ns.Labels)), nil
}

// MatchPolicy picks the policy of a VMI with KubeVirt's precedence: among
// the policies whose every selector label is on the VMI
// (virtualMachineInstanceSelector) and on its namespace
// (namespaceSelector), the one with the most selector labels wins; a tie
// goes to the first name in lexical order. nil when none matches. It is pure.
func MatchPolicy(policies []*migrationsv1alpha1.MigrationPolicy, vmiLabels, nsLabels map[string]string) *migrationsv1alpha1.MigrationPolicy {
	var best *migrationsv1alpha1.MigrationPolicy
	bestN := -1
	for _, p := range policies {
		n, ok := matches(p, vmiLabels, nsLabels)
		if !ok {
			continue
		}
		if n > bestN || (n == bestN && p.Name < best.Name) {
			best, bestN = p, n
		}
	}
	return best
}

// matches reports whether p selects the VMI, and with how many labels.
func matches(p *migrationsv1alpha1.MigrationPolicy, vmiLabels, nsLabels map[string]string) (int, bool) {
	if p.Spec.Selectors == nil {
		return 0, true
	}
	n := 0
	for _, sel := range []struct {
		want migrationsv1alpha1.LabelSelector
		have map[string]string
	}{{p.Spec.Selectors.VirtualMachineInstanceSelector, vmiLabels}, {p.Spec.Selectors.NamespaceSelector, nsLabels}} {
		for k, v := range sel.want {
			if got, ok := sel.have[k]; !ok || got != v {
				return 0, false
			}
			n++
		}
	}
	return n, true
}

// ApplyPolicy returns cluster with the options p sets (nil p: cluster).
func ApplyPolicy(cluster v1.MigrationConfiguration, p *migrationsv1alpha1.MigrationPolicy) v1.MigrationConfiguration {
	out := *cluster.DeepCopy()
	if p == nil {
		return out
	}
	s := p.Spec.DeepCopy()
	if s.AllowAutoConverge != nil {
		out.AllowAutoConverge = s.AllowAutoConverge
	}
	if s.BandwidthPerMigration != nil {
		out.BandwidthPerMigration = s.BandwidthPerMigration
	}
	if s.CompletionTimeoutPerGiB != nil {
		out.CompletionTimeoutPerGiB = s.CompletionTimeoutPerGiB
	}
	if s.AllowPostCopy != nil {
		out.AllowPostCopy = s.AllowPostCopy
	}
	if s.AllowWorkloadDisruption != nil {
		out.AllowWorkloadDisruption = s.AllowWorkloadDisruption
	}
	return out
}
