package migration

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

func TestPlanEvacuation(t *testing.T) {
	vmiOn := func(name string, s v1.EvictionStrategy, mod ...func(*v1.VirtualMachineInstance)) *v1.VirtualMachineInstance {
		v := runningVMI(mod...)
		v.Name = name
		if s != "" {
			v.Spec.EvictionStrategy = ptr.To(s)
		}
		return v
	}
	notMigratable := func(v *v1.VirtualMachineInstance) { v.Status.Conditions[0].Status = corev1.ConditionFalse }
	marked := func(v *v1.VirtualMachineInstance) { v.Status.EvacuationNodeName = "a" }
	mig := func(vmi string, p v1.VirtualMachineInstanceMigrationPhase, at time.Time) *v1.VirtualMachineInstanceMigration {
		return &v1.VirtualMachineInstanceMigration{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Annotations: map[string]string{EvacuationAnnotation: "a"}},
			Spec: v1.VirtualMachineInstanceMigrationSpec{VMIName: vmi},
			Status: v1.VirtualMachineInstanceMigrationStatus{Phase: p, PhaseTransitionTimestamps: []v1.VirtualMachineInstanceMigrationPhaseTransitionTimestamp{
				{Phase: p, PhaseTransitionTimestamp: metav1.NewTime(at)}}}}
	}
	tests := []struct {
		name        string
		cordoned    bool
		def         v1.EvictionStrategy
		vmis        []*v1.VirtualMachineInstance
		migs        []*v1.VirtualMachineInstanceMigration
		perNode     uint32
		wantMark    []string
		wantMigrate []string
	}{
		{"not cordoned: nothing", false, "", []*v1.VirtualMachineInstance{vmiOn("x", v1.EvictionStrategyLiveMigrate)}, nil, 2, nil, nil},
		{"uncordoned: mark cleared", false, "", []*v1.VirtualMachineInstance{vmiOn("x", v1.EvictionStrategyLiveMigrate, marked)}, nil, 2, []string{"x"}, nil},
		{"cordoned: strategies", true, "", []*v1.VirtualMachineInstance{
			vmiOn("live", v1.EvictionStrategyLiveMigrate), vmiOn("none", v1.EvictionStrategyNone), vmiOn("ext", v1.EvictionStrategyExternal),
			vmiOn("ifp", v1.EvictionStrategyLiveMigrateIfPossible), vmiOn("ifp-no", v1.EvictionStrategyLiveMigrateIfPossible, notMigratable),
			vmiOn("default", ""),
		}, nil, 5, []string{"live", "ifp"}, []string{"live", "ifp"}},
		{"cluster default LiveMigrate", true, v1.EvictionStrategyLiveMigrate, []*v1.VirtualMachineInstance{vmiOn("default", "")}, nil, 5, []string{"default"}, []string{"default"}},
		{"node limit", true, "", []*v1.VirtualMachineInstance{vmiOn("x", v1.EvictionStrategyLiveMigrate), vmiOn("y", v1.EvictionStrategyLiveMigrate),
			vmiOn("z", v1.EvictionStrategyLiveMigrate)}, nil, 2, []string{"x", "y", "z"}, []string{"x", "y"}},
		{"already migrating", true, "", []*v1.VirtualMachineInstance{vmiOn("x", v1.EvictionStrategyLiveMigrate, marked)},
			[]*v1.VirtualMachineInstanceMigration{mig("x", v1.MigrationRunning, now)}, 2, nil, nil},
		{"failed recently: back off", true, "", []*v1.VirtualMachineInstance{vmiOn("x", v1.EvictionStrategyLiveMigrate, marked)},
			[]*v1.VirtualMachineInstanceMigration{mig("x", v1.MigrationFailed, now.Add(-time.Second))}, 2, nil, nil},
		{"failed long ago: retry", true, "", []*v1.VirtualMachineInstance{vmiOn("x", v1.EvictionStrategyLiveMigrate, marked)},
			[]*v1.VirtualMachineInstanceMigration{mig("x", v1.MigrationFailed, now.Add(-time.Minute))}, 2, nil, []string{"x"}},
	}
	names := func(vs []*v1.VirtualMachineInstance) []string {
		var out []string
		for _, v := range vs {
			out = append(out, v.Name)
		}
		return out
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := PlanEvacuation(EvacuationInput{Node: "a", Cordoned: tc.cordoned, VMIs: tc.vmis, Migrations: tc.migs, Default: tc.def,
				PerCluster: 5, PerNode: tc.perNode, Now: now, Backoff: 30 * time.Second})
			if diff := cmp.Diff(tc.wantMark, names(p.Mark)); diff != "" {
				t.Errorf("mark (-want +got):\n%s", diff)
			}
			var migrate []string
			for _, m := range p.Migrate {
				migrate = append(migrate, m.VMI.Name)
			}
			if diff := cmp.Diff(tc.wantMigrate, migrate); diff != "" {
				t.Errorf("migrate (-want +got):\n%s", diff)
			}
		})
	}
}

// TestEvacuationNames: an evacuation VMIM's name is fixed by the VMI's UID
// and the attempt, so a sync whose cache misses the latest attempt names
// it again (the API server refuses the copy) instead of making a second.
func TestEvacuationNames(t *testing.T) {
	vm := runningVMI(func(v *v1.VirtualMachineInstance) {
		v.Name, v.UID = "x", "uid-1"
		v.Spec.EvictionStrategy = ptr.To(v1.EvictionStrategyLiveMigrate)
	})
	other := vm.DeepCopy()
	other.UID = "uid-2"
	prefix := evacuationPrefix(vm)
	failed := func(name string) *v1.VirtualMachineInstanceMigration {
		return &v1.VirtualMachineInstanceMigration{ObjectMeta: metav1.ObjectMeta{Namespace: vm.Namespace, Name: name,
			Annotations: map[string]string{EvacuationAnnotation: "a"}},
			Spec:   v1.VirtualMachineInstanceMigrationSpec{VMIName: "x"},
			Status: v1.VirtualMachineInstanceMigrationStatus{Phase: v1.MigrationFailed}}
	}
	now := time.Now()
	tests := []struct {
		name string
		vmi  *v1.VirtualMachineInstance
		migs []*v1.VirtualMachineInstanceMigration
		want string
	}{
		{"first attempt", vm, nil, prefix + "1"},
		{"after two failed", vm, []*v1.VirtualMachineInstanceMigration{failed(prefix + "1"), failed(prefix + "2")}, prefix + "3"},
		{"the oldest garbage collected", vm, []*v1.VirtualMachineInstanceMigration{failed(prefix + "2")}, prefix + "3"},
		{"same name, new VMI", other, []*v1.VirtualMachineInstanceMigration{failed(prefix + "1")}, evacuationPrefix(other) + "1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := PlanEvacuation(EvacuationInput{Node: "a", Cordoned: true, VMIs: []*v1.VirtualMachineInstance{tc.vmi}, Migrations: tc.migs,
				PerCluster: 5, PerNode: 2, Now: now, Backoff: 0})
			if len(p.Migrate) != 1 {
				t.Fatalf("migrate %d VMIs, want 1", len(p.Migrate))
			}
			if got := p.Migrate[0].Name; got != tc.want {
				t.Errorf("name %q, want %q", got, tc.want)
			}
			if len(tc.want) > 63 {
				t.Errorf("name %q longer than 63", tc.want)
			}
		})
	}
}

func TestWantPDB(t *testing.T) {
	tests := []struct {
		name     string
		strategy *v1.EvictionStrategy
		def      v1.EvictionStrategy
		mod      func(*v1.VirtualMachineInstance)
		want     int
	}{
		{"none set", nil, "", nil, 0},
		{"None", ptr.To(v1.EvictionStrategyNone), v1.EvictionStrategyLiveMigrate, nil, 0},
		{"cluster default", nil, v1.EvictionStrategyLiveMigrate, nil, 1},
		{"LiveMigrate", ptr.To(v1.EvictionStrategyLiveMigrate), "", nil, 1},
		{"External blocks", ptr.To(v1.EvictionStrategyExternal), "", nil, 1},
		{"IfPossible, migratable", ptr.To(v1.EvictionStrategyLiveMigrateIfPossible), "", nil, 1},
		{"IfPossible, not migratable", ptr.To(v1.EvictionStrategyLiveMigrateIfPossible), "", func(v *v1.VirtualMachineInstance) {
			v.Status.Conditions[0].Status = corev1.ConditionFalse
		}, 0},
		{"migrating: both pods", ptr.To(v1.EvictionStrategyLiveMigrate), "", withState(nil), 2},
		{"migration completed", ptr.To(v1.EvictionStrategyLiveMigrate), "", withState(func(s *v1.VirtualMachineInstanceMigrationState) { s.Completed = true }), 1},
		{"being evacuated, target not named yet: both pods", ptr.To(v1.EvictionStrategyLiveMigrate), "", func(v *v1.VirtualMachineInstance) {
			v.Status.EvacuationNodeName = "node0"
		}, 2},
		{"final VMI", ptr.To(v1.EvictionStrategyLiveMigrate), "", func(v *v1.VirtualMachineInstance) { v.Status.Phase = v1.Succeeded }, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := runningVMI()
			v.Spec.EvictionStrategy = tc.strategy
			if tc.mod != nil {
				tc.mod(v)
			}
			if got := WantPDB(v, tc.def); got != tc.want {
				t.Errorf("WantPDB = %d, want %d", got, tc.want)
			}
		})
	}
}
