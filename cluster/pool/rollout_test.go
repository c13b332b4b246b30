package pool

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"

	poolv1 "github.com/nodevirt/nodevirt/cluster/api/pool/v1alpha1"
	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// templated gives the pool a VM template with guest memory mem.
func templated(mem string) func(*poolv1.VirtualMachinePool) {
	return func(p *poolv1.VirtualMachinePool) {
		q := resource.MustParse(mem)
		p.Spec.VirtualMachineTemplate.Spec = v1.VirtualMachineSpec{Template: &v1.VirtualMachineInstanceTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "db"}},
			Spec:       v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{Memory: &v1.Memory{Guest: &q}}},
		}}
	}
}

func unavailable(mu intstr.IntOrString) func(*poolv1.VirtualMachinePool) {
	return func(p *poolv1.VirtualMachinePool) { p.Spec.MaxUnavailable = &mu }
}

func atRevision(rev string) func(*v1.VirtualMachine) {
	return func(v *v1.VirtualMachine) { v.Labels[v1.VirtualMachinePoolRevisionName] = rev }
}

// vmiOf is the VMI of VM name, made from revision rev ("": unlabelled).
func vmiOf(name, rev string, ready bool) *v1.VirtualMachineInstance {
	vmi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{
		Namespace: "ns", Name: name, UID: types.UID(name + "-vmi-uid"), Labels: map[string]string{},
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(vm(name), v1.SchemeGroupVersion.WithKind(v1.KindVM))},
	}}
	if rev != "" {
		vmi.Labels[v1.VirtualMachinePoolRevisionName] = rev
	}
	vmi.Status.Phase = v1.Running
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	vmi.Status.Conditions = []v1.VirtualMachineInstanceCondition{{Type: v1.VirtualMachineInstanceReady, Status: status}}
	return vmi
}

func vmiNames(vmis []*v1.VirtualMachineInstance) []string {
	var out []string
	for _, v := range vmis {
		out = append(out, v.Name)
	}
	return out
}

func TestPlan_Rollout(t *testing.T) {
	oldPool, newPool := testPool(4, templated("128Mi")), testPool(4, templated("256Mi"))
	oldRev, newRev := Revision(oldPool), Revision(newPool)
	four := func(mods ...func(*v1.VirtualMachine)) []*v1.VirtualMachine {
		var out []*v1.VirtualMachine
		for _, n := range []string{"pool-0", "pool-1", "pool-2", "pool-3"} {
			out = append(out, vm(n, mods...))
		}
		return out
	}
	vmis := func(rev string, ready ...bool) []*v1.VirtualMachineInstance {
		var out []*v1.VirtualMachineInstance
		for i, r := range ready {
			out = append(out, vmiOf(Name("pool", i), rev, r))
		}
		return out
	}
	tests := []struct {
		name             string
		pool             *poolv1.VirtualMachinePool
		vms              []*v1.VirtualMachine
		vmis             []*v1.VirtualMachineInstance
		update, restart  []string
		relabel          []string
		unsettledOrScale bool
	}{
		{name: "UpToDate", pool: newPool, vms: four(readyVM, atRevision(newRev)), vmis: vmis(newRev, true, true, true, true)},
		{name: "TemplateChangedVMsUpdatedAtOnce", pool: newPool, vms: four(readyVM, atRevision(oldRev)), vmis: vmis(oldRev, true, true, true, true),
			update: []string{"pool-0", "pool-1", "pool-2", "pool-3"}},
		{name: "VMIsRestartedAllAtOnceByDefault", pool: newPool, vms: four(readyVM, atRevision(newRev)), vmis: vmis(oldRev, true, true, true, true),
			restart: []string{"pool-0", "pool-1", "pool-2", "pool-3"}},
		{name: "MaxUnavailableOne", pool: testPool(4, templated("256Mi"), unavailable(intstr.FromInt32(1))),
			vms: four(readyVM, atRevision(newRev)), vmis: vmis(oldRev, true, true, true, true), restart: []string{"pool-0"}},
		{name: "MaxUnavailable50Percent", pool: testPool(4, templated("256Mi"), unavailable(intstr.FromString("50%"))),
			vms: four(readyVM, atRevision(newRev)), vmis: vmis(oldRev, true, true, true, true), restart: []string{"pool-0", "pool-1"}},
		{name: "MaxUnavailableRoundsDownToAtLeastOne", pool: testPool(4, templated("256Mi"), unavailable(intstr.FromString("10%"))),
			vms: four(readyVM, atRevision(newRev)), vmis: vmis(oldRev, true, true, true, true), restart: []string{"pool-0"}},
		{name: "BudgetTakenByAVMIBeingReplaced", pool: testPool(4, templated("256Mi"), unavailable(intstr.FromInt32(1))),
			vms:  four(readyVM, atRevision(newRev)),
			vmis: append(vmis(newRev, false), vmis(oldRev, true, true, true, true)[1:]...)},
		{name: "NotReadyVMRestartedOutsideTheBudget", pool: testPool(4, templated("256Mi"), unavailable(intstr.FromInt32(1))),
			vms:  append(four(atRevision(newRev))[:1], four(readyVM, atRevision(newRev))[1:]...),
			vmis: vmis(oldRev, false, true, true, true), restart: []string{"pool-0"}},
		{name: "UnlabelledVMIsTakenAsCurrent", pool: newPool, vms: four(readyVM, atRevision(newRev)), vmis: vmis("", true, true, true, true),
			relabel: []string{"pool-0", "pool-1", "pool-2", "pool-3"}},
		{name: "NoRolloutWhileScaling", pool: testPool(5, templated("256Mi")), vms: four(readyVM, atRevision(oldRev)),
			vmis: vmis(oldRev, true, true, true, true), unsettledOrScale: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Plan(Observed{Pool: tt.pool, VMs: tt.vms, VMIs: tt.vmis, Settled: true, Now: t0})
			var relabel []string
			for _, l := range r.Relabel {
				relabel = append(relabel, l.VMI.Name)
				if l.Revision != newRev {
					t.Errorf("relabel %s with %q, want %q", l.VMI.Name, l.Revision, newRev)
				}
			}
			type out struct{ Update, Restart, Relabel []string }
			want := out{tt.update, tt.restart, tt.relabel}
			if d := cmp.Diff(want, out{vmNames(r.Update), vmiNames(r.Restart), relabel}); d != "" {
				t.Errorf("rollout (-want +got):\n%s", d)
			}
			if tt.unsettledOrScale && len(r.Create) == 0 {
				t.Errorf("scaling case: no create planned")
			}
			for _, u := range r.Update {
				if u.Labels[v1.VirtualMachinePoolRevisionName] != newRev || u.Spec.Template.ObjectMeta.Labels[v1.VirtualMachinePoolRevisionName] != newRev ||
					u.Spec.Template.Spec.Domain.Memory.Guest.String() != "256Mi" || u.ResourceVersion != tt.vms[0].ResourceVersion {
					t.Errorf("updated VM %s: labels %v, template labels %v, memory %v", u.Name, u.Labels,
						u.Spec.Template.ObjectMeta.Labels, u.Spec.Template.Spec.Domain.Memory.Guest)
				}
			}
		})
	}
}

func TestRevision(t *testing.T) {
	a, b := testPool(1, templated("128Mi")), testPool(7, templated("128Mi"))
	if Revision(a) != Revision(b) {
		t.Errorf("replicas changed the revision: %s, %s", Revision(a), Revision(b))
	}
	if c := testPool(1, templated("256Mi")); Revision(c) == Revision(a) {
		t.Errorf("a template change kept the revision %s", Revision(a))
	}
	long := testPool(1, templated("128Mi"))
	long.Name = strings.Repeat("p", 200)
	for _, p := range []*poolv1.VirtualMachinePool{a, long} {
		if errs := validation.IsValidLabelValue(Revision(p)); len(errs) > 0 {
			t.Errorf("Revision %q is not a label value: %v", Revision(p), errs)
		}
	}
}
