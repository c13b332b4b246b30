package operator

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

var now = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

func kubevirt(mod ...func(*v1.KubeVirt)) *v1.KubeVirt {
	kv := &v1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Namespace: "nodevirt", Name: "kubevirt", Generation: 3,
		Finalizers: []string{Finalizer}}}
	for _, m := range mod {
		m(kv)
	}
	return kv
}

func deleting(kv *v1.KubeVirt) { kv.DeletionTimestamp = &metav1.Time{Time: now} }

func deployed(kv *v1.KubeVirt) {
	kv.Status.Phase, kv.Status.ObservedKubeVirtVersion = v1.KubeVirtPhaseDeployed, "v1"
}

var (
	ready   = Workload{Kind: "Deployment", Name: "c", Found: true, Updated: true, Available: true, Status: "1/1"}
	rolling = Workload{Kind: "DaemonSet", Name: "a", Found: true, Updated: false, Available: true, Status: "0/1 nodes updated"}
	broken  = Workload{Kind: "Deployment", Name: "api", Found: true, Updated: true, Available: false, Status: "0 available"}
	missing = Workload{Kind: "Deployment", Name: "c"}
)

func observed(kv *v1.KubeVirt, tag string, ws ...Workload) Observed {
	return Observed{KubeVirt: kv, Target: Images{Registry: "r", Tag: tag}, OperatorVersion: "v1", Workloads: ws, Now: now}
}

func cond(s v1.KubeVirtStatus, typ string) v1.KubeVirtCondition {
	for _, c := range s.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return v1.KubeVirtCondition{}
}

func TestPlan(t *testing.T) {
	type want struct {
		phase                        v1.KubeVirtPhase
		available, progress, degrade corev1.ConditionStatus
		reason                       string // of Progressing, or of Degraded while deleting
		observed                     string
		apply, addFin, rmFin         bool
		delWorkloads, delComponents  bool
	}
	tests := []struct {
		name string
		o    Observed
		want want
	}{
		{"new: finalizer, apply, Deploying", observed(kubevirt(func(kv *v1.KubeVirt) { kv.Finalizers = nil }), "v1", missing),
			want{phase: v1.KubeVirtPhaseDeploying, available: "False", progress: "True", degrade: "False", reason: ReasonDeploying, apply: true, addFin: true}},
		{"all ready: Deployed", observed(kubevirt(), "v1", ready),
			want{phase: v1.KubeVirtPhaseDeployed, available: "True", progress: "False", degrade: "False", reason: ReasonAllComponentsReady, observed: "v1", apply: true}},
		{"upgrade rolling: Deployed, Progressing, still available", observed(kubevirt(deployed), "v2", ready, rolling),
			want{phase: v1.KubeVirtPhaseDeployed, available: "True", progress: "True", degrade: "False", reason: ReasonUpdating, observed: "v1", apply: true}},
		{"rolled but unavailable: Degraded", observed(kubevirt(), "v1", ready, broken),
			want{phase: v1.KubeVirtPhaseDeploying, available: "False", progress: "False", degrade: "True", reason: ReasonRolledOut, apply: true}},
		{"deleting with VMIs: blocked", func() Observed {
			o := observed(kubevirt(deleting, deployed), "v1", ready)
			o.VMIs, o.Remaining = 2, 10
			return o
		}(), want{phase: v1.KubeVirtPhaseDeleting, available: "False", progress: "True", degrade: "True", reason: ReasonDeletionBlocked, observed: "v1"}},
		{"deleting with VMs, RemoveWorkloads: delete them first", func() Observed {
			o := observed(kubevirt(deleting, deployed, func(kv *v1.KubeVirt) {
				kv.Spec.UninstallStrategy = v1.KubeVirtUninstallStrategyRemoveWorkloads
			}), "v1", ready)
			o.VMs, o.Remaining = 1, 10
			return o
		}(), want{phase: v1.KubeVirtPhaseDeleting, available: "False", progress: "True", degrade: "False", reason: ReasonRemovingWorkloads, observed: "v1", delWorkloads: true}},
		{"deleting, no workloads: remove the components", func() Observed {
			o := observed(kubevirt(deleting, deployed), "v1", ready)
			o.Remaining = 10
			return o
		}(), want{phase: v1.KubeVirtPhaseDeleting, available: "False", progress: "True", degrade: "False", reason: ReasonDeleting, observed: "v1", delComponents: true}},
		{"deleting, all gone: Deleted, finalizer off", observed(kubevirt(deleting, deployed), "v1"),
			want{phase: v1.KubeVirtPhaseDeleted, available: "False", progress: "False", degrade: "False", reason: ReasonDeleting, observed: "v1", rmFin: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Plan(tt.o)
			s := r.Status
			reasonOf := ConditionProgressing
			if tt.o.KubeVirt.DeletionTimestamp != nil {
				reasonOf = ConditionDegraded
			}
			got := want{phase: s.Phase, available: cond(s, ConditionAvailable).Status, progress: cond(s, ConditionProgressing).Status,
				degrade: cond(s, ConditionDegraded).Status, reason: cond(s, reasonOf).Reason, observed: s.ObservedKubeVirtVersion,
				apply: r.Apply, addFin: r.AddFinalizer, rmFin: r.RemoveFinalizer, delWorkloads: r.DeleteWorkloads, delComponents: r.DeleteComponents}
			if got != tt.want {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
			if tt.o.KubeVirt.DeletionTimestamp == nil && (s.TargetKubeVirtVersion != tt.o.Target.Tag || s.ObservedGeneration == nil || *s.ObservedGeneration != 3) {
				t.Errorf("target %q observedGeneration %v", s.TargetKubeVirtVersion, s.ObservedGeneration)
			}
			if (tt.want.delWorkloads || tt.want.delComponents || tt.want.reason == ReasonDeletionBlocked) && r.Requeue == 0 {
				t.Error("a deletion under way must be looked at again")
			}
		})
	}
}

// TestPlan_StableConditions: a second sync with nothing changed writes the
// same status (no transition or probe times moving).
func TestPlan_StableConditions(t *testing.T) {
	kv := kubevirt()
	r := Plan(observed(kv, "v1", ready, rolling))
	kv.Status = r.Status
	o := observed(kv, "v1", ready, rolling)
	o.Now = now.Add(time.Minute)
	if r2 := Plan(o); !equalStatus(r.Status, r2.Status) {
		t.Errorf("status changed with nothing new:\n%+v\n%+v", r.Status, r2.Status)
	}
}

func equalStatus(a, b v1.KubeVirtStatus) bool {
	if len(a.Conditions) != len(b.Conditions) || a.Phase != b.Phase {
		return false
	}
	for i := range a.Conditions {
		if a.Conditions[i] != b.Conditions[i] {
			return false
		}
	}
	return true
}

func TestPlan_InvalidSpec(t *testing.T) {
	o := observed(kubevirt(deployed), "v1", ready)
	o.Invalid = "spec.customizeComponents.patches[0]: bad"
	r := Plan(o)
	if r.Apply || cond(r.Status, ConditionDegraded).Reason != ReasonInvalidSpec || r.Status.Phase != v1.KubeVirtPhaseDeployed {
		t.Errorf("an invalid spec: apply %v, status %+v", r.Apply, r.Status)
	}
}

func TestPlan_DeletionWithoutFinalizer(t *testing.T) {
	r := Plan(observed(kubevirt(deleting, func(kv *v1.KubeVirt) { kv.Finalizers = nil }), "v1"))
	if r.Apply || r.DeleteComponents || r.RemoveFinalizer || r.Status.Phase != "" {
		t.Errorf("a deleted resource without our finalizer is not ours to act on: %+v", r)
	}
}
