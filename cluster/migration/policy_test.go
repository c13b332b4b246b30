package migration

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	migrationsv1alpha1 "github.com/nodevirt/nodevirt/cluster/api/migrations/v1alpha1"
	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

func TestMatchPolicy(t *testing.T) {
	pol := func(name string, vmiSel, nsSel map[string]string) *migrationsv1alpha1.MigrationPolicy {
		return &migrationsv1alpha1.MigrationPolicy{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: migrationsv1alpha1.MigrationPolicySpec{Selectors: &migrationsv1alpha1.Selectors{
				VirtualMachineInstanceSelector: vmiSel, NamespaceSelector: nsSel}}}
	}
	vmiLabels := map[string]string{"app": "db", "tier": "gold"}
	nsLabels := map[string]string{"team": "a"}
	tests := []struct {
		name     string
		policies []*migrationsv1alpha1.MigrationPolicy
		want     string
	}{
		{"none", nil, ""},
		{"no match", []*migrationsv1alpha1.MigrationPolicy{pol("x", map[string]string{"app": "web"}, nil)}, ""},
		{"partial match is no match", []*migrationsv1alpha1.MigrationPolicy{pol("x", map[string]string{"app": "db", "zone": "z"}, nil)}, ""},
		{"namespace must match too", []*migrationsv1alpha1.MigrationPolicy{pol("x", map[string]string{"app": "db"}, map[string]string{"team": "b"})}, ""},
		{"most labels wins", []*migrationsv1alpha1.MigrationPolicy{
			pol("one", map[string]string{"app": "db"}, nil),
			pol("three", map[string]string{"app": "db", "tier": "gold"}, map[string]string{"team": "a"}),
			pol("two", nil, map[string]string{"team": "a"}),
		}, "three"},
		{"namespace labels count", []*migrationsv1alpha1.MigrationPolicy{
			pol("vmi", map[string]string{"app": "db"}, nil), pol("both", map[string]string{"app": "db"}, map[string]string{"team": "a"}),
		}, "both"},
		{"tie: first name", []*migrationsv1alpha1.MigrationPolicy{
			pol("b", map[string]string{"app": "db"}, nil), pol("a", map[string]string{"tier": "gold"}, nil),
		}, "a"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := ""
			if p := MatchPolicy(tc.policies, vmiLabels, nsLabels); p != nil {
				got = p.Name
			}
			if got != tc.want {
				t.Errorf("MatchPolicy = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestApplyPolicy(t *testing.T) {
	bw := resource.MustParse("32Mi")
	cluster := v1.MigrationConfiguration{ParallelMigrationsPerCluster: ptr.To[uint32](3), CompletionTimeoutPerGiB: ptr.To[int64](100),
		AllowPostCopy: ptr.To(false)}
	p := &migrationsv1alpha1.MigrationPolicy{Spec: migrationsv1alpha1.MigrationPolicySpec{
		AllowPostCopy: ptr.To(true), BandwidthPerMigration: &bw, AllowAutoConverge: ptr.To(true)}}
	want := v1.MigrationConfiguration{ParallelMigrationsPerCluster: ptr.To[uint32](3), CompletionTimeoutPerGiB: ptr.To[int64](100),
		AllowPostCopy: ptr.To(true), BandwidthPerMigration: &bw, AllowAutoConverge: ptr.To(true)}
	if diff := cmp.Diff(want, ApplyPolicy(cluster, p)); diff != "" {
		t.Errorf("ApplyPolicy (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(cluster, ApplyPolicy(cluster, nil)); diff != "" {
		t.Errorf("no policy (-want +got):\n%s", diff)
	}
}
