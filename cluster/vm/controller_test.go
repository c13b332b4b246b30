package vm

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/cluster/client/clientset/versioned/fake"
	listers "github.com/nodevirt/nodevirt/cluster/client/listers/api/v1"
)

// fixture follows sample-controller: objects seeded into informer indexers
// and the fake clientset; Sync is called directly and the API actions it
// made are compared.
type fixture struct {
	t       *testing.T
	client  *fake.Clientset
	vms     cache.Indexer
	vmis    cache.Indexer
	queue   *fakeQueue
	objects []runtime.Object
}

type fakeQueue struct{ after map[string]time.Duration }

func (q *fakeQueue) EnqueueAfter(key string, d time.Duration) { q.after[key] = d }

func newFixture(t *testing.T) *fixture {
	return &fixture{t: t, vms: cache.NewIndexer(cache.MetaNamespaceKeyFunc, nil),
		vmis: cache.NewIndexer(cache.MetaNamespaceKeyFunc, nil), queue: &fakeQueue{after: map[string]time.Duration{}}}
}

func (f *fixture) addVM(vm *v1.VirtualMachine) {
	_ = f.vms.Add(vm)
	f.objects = append(f.objects, vm)
}

func (f *fixture) addVMI(vmi *v1.VirtualMachineInstance) {
	_ = f.vmis.Add(vmi)
	f.objects = append(f.objects, vmi)
}

// run syncs key and returns the write actions.
func (f *fixture) run(key string) []core.Action {
	f.t.Helper()
	f.client = fake.NewSimpleClientset(f.objects...)
	c := New(Deps{
		VMs: listers.NewVirtualMachineLister(f.vms), VMIs: listers.NewVirtualMachineInstanceLister(f.vmis),
		Client: f.client.KubevirtV1(), Recorder: record.NewFakeRecorder(10), Queue: f.queue,
		Now: func() time.Time { return t0 }, Jitter: func() float64 { return 0 },
	})
	if err := c.Sync(context.Background(), key); err != nil {
		f.t.Fatalf("Sync(%s): %v", key, err)
	}
	var writes []core.Action
	for _, a := range f.client.Actions() {
		if a.GetVerb() != "get" && a.GetVerb() != "list" && a.GetVerb() != "watch" {
			writes = append(writes, a)
		}
	}
	return writes
}

type action struct{ Verb, Resource, Subresource string }

func summarize(as []core.Action) []action {
	var out []action
	for _, a := range as {
		out = append(out, action{a.GetVerb(), a.GetResource().Resource, a.GetSubresource()})
	}
	return out
}

func TestSync_CreatesVMIFromTemplate(t *testing.T) {
	f := newFixture(t)
	vm := testVM(v1.RunStrategyAlways, func(vm *v1.VirtualMachine) {
		vm.Spec.Template.ObjectMeta = metav1.ObjectMeta{Labels: map[string]string{"app": "x"}, Annotations: map[string]string{"a": "b"}}
		vm.Spec.Template.Spec.Hostname = "guest"
	})
	f.addVM(vm)
	got := f.run("ns/vm")
	want := []action{{"create", "virtualmachineinstances", ""}, {"patch", "virtualmachines", "status"}}
	if diff := cmp.Diff(want, summarize(got)); diff != "" {
		t.Fatalf("actions (-want +got):\n%s", diff)
	}
	vmi := got[0].(core.CreateAction).GetObject().(*v1.VirtualMachineInstance)
	wantVMI := &v1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{
			Name: "vm", Namespace: "ns", Labels: map[string]string{"app": "x"}, Annotations: map[string]string{"a": "b"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachine", Name: "vm", UID: "vm-uid",
				Controller: ptrTrue(), BlockOwnerDeletion: ptrTrue()}},
			Finalizers: []string{v1.VirtualMachineInstanceFinalizer},
		},
		Spec: v1.VirtualMachineInstanceSpec{Hostname: "guest", Domain: v1.DomainSpec{Firmware: &v1.Firmware{UUID: "vm-uid"}}},
	}
	if diff := cmp.Diff(wantVMI, vmi); diff != "" {
		t.Errorf("vmi (-want +got):\n%s", diff)
	}
	written, err := f.client.KubevirtV1().VirtualMachines("ns").Get(context.Background(), "vm", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st := written.Status
	// runStrategy is recorded once the VMI is seen, not with its create.
	if st.PrintableStatus != v1.VirtualMachineStatusStopped || st.RunStrategy != "" {
		t.Errorf("status = %+v", st)
	}
}

func ptrTrue() *bool { b := true; return &b }

func TestDefaultFirmwareUUID(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  types.UID
		want types.UID
	}{
		{"unset: the VM's UID", "", "vm-uid"},
		{"set in the template: kept", "5d307ca9-b3ef-428c-8861-06e72d69f223", "5d307ca9-b3ef-428c-8861-06e72d69f223"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vm := testVM(v1.RunStrategyAlways, func(vm *v1.VirtualMachine) {
				if tc.set != "" {
					vm.Spec.Template.Spec.Domain.Firmware = &v1.Firmware{UUID: tc.set, Serial: "s"}
				}
			})
			vmi := NewVMI(vm)
			defaultFirmwareUUID(vm, vmi)
			got := vmi.Spec.Domain.Firmware
			if got == nil || got.UUID != tc.want {
				t.Fatalf("firmware = %+v, want uuid %s", got, tc.want)
			}
			if tc.set != "" && got.Serial != "s" {
				t.Errorf("serial lost: %+v", got)
			}
			if vm.Spec.Template.Spec.Domain.Firmware != nil && tc.set == "" {
				t.Errorf("the VM's template was changed: %+v", vm.Spec.Template.Spec.Domain.Firmware)
			}
		})
	}
}

func TestSync_Actions(t *testing.T) {
	owned := func(vmi *v1.VirtualMachineInstance) {
		vmi.OwnerReferences = []metav1.OwnerReference{ownerRef(testVM(v1.RunStrategyAlways))}
	}
	tests := []struct {
		name string
		vm   *v1.VirtualMachine
		vmi  *v1.VirtualMachineInstance
		want []action
	}{
		{"halted deletes running vmi", testVM(v1.RunStrategyHalted), testVMI(v1.Running, owned),
			[]action{{"delete", "virtualmachineinstances", ""}, {"patch", "virtualmachines", "status"}}},
		{"orphan adopted", testVM(v1.RunStrategyAlways), testVMI(v1.Running),
			[]action{{"patch", "virtualmachineinstances", ""}}},
		{"finalizer added", testVM(v1.RunStrategyHalted, func(vm *v1.VirtualMachine) { vm.Finalizers = nil }), nil,
			[]action{{"update", "virtualmachines", ""}, {"patch", "virtualmachines", "status"}}},
		{"steady state writes nothing", testVM(v1.RunStrategyHalted, func(vm *v1.VirtualMachine) {
			vm.Status = Plan(Observed{VM: testVM(v1.RunStrategyHalted), Now: t0}).Status
		}), nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.addVM(tc.vm)
			if tc.vmi != nil {
				f.addVMI(tc.vmi)
			}
			if diff := cmp.Diff(tc.want, summarize(f.run("ns/vm"))); diff != "" {
				t.Errorf("actions (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSync_OrphanOfDeletedVMIsDeleted(t *testing.T) {
	f := newFixture(t)
	f.addVMI(testVMI(v1.Running, func(vmi *v1.VirtualMachineInstance) {
		vmi.OwnerReferences = []metav1.OwnerReference{ownerRef(testVM(v1.RunStrategyAlways))}
	}))
	if diff := cmp.Diff([]action{{"delete", "virtualmachineinstances", ""}}, summarize(f.run("ns/vm"))); diff != "" {
		t.Errorf("actions (-want +got):\n%s", diff)
	}
}

func TestSync_BackoffRequeues(t *testing.T) {
	f := newFixture(t)
	f.addVM(testVM(v1.RunStrategyAlways, backoffUntil(7*time.Second, 1)))
	if got := summarize(f.run("ns/vm")); len(got) != 1 || got[0].Subresource != "status" {
		t.Fatalf("actions = %v, want only a status update", got)
	}
	if d := f.queue.after["ns/vm"]; d != 7*time.Second {
		t.Errorf("requeued after %s, want 7s", d)
	}
}

func TestSync_RejectedTemplateSetsFailure(t *testing.T) {
	f := newFixture(t)
	f.addVM(testVM(v1.RunStrategyAlways))
	f.client = fake.NewSimpleClientset(f.objects...)
	f.client.PrependReactor("create", "virtualmachineinstances", func(core.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewInvalid(v1.SchemeGroupVersion.WithKind("VirtualMachineInstance").GroupKind(), "vm", nil)
	})
	c := New(Deps{
		VMs: listers.NewVirtualMachineLister(f.vms), VMIs: listers.NewVirtualMachineInstanceLister(f.vmis),
		Client: f.client.KubevirtV1(), Recorder: record.NewFakeRecorder(10), Queue: f.queue,
		Now: func() time.Time { return t0 }, Jitter: func() float64 { return 0 },
	})
	if err := c.Sync(context.Background(), "ns/vm"); err != nil {
		t.Fatalf("Sync returned %v: a rejected template must not be retried hot", err)
	}
	// The status as written: read it back from the fake's tracker.
	written, err := f.client.KubevirtV1().VirtualMachines("ns").Get(context.Background(), "vm", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st := written.Status
	var failure *v1.VirtualMachineCondition
	for i := range st.Conditions {
		if st.Conditions[i].Type == v1.VirtualMachineFailure {
			failure = &st.Conditions[i]
		}
	}
	if failure == nil || failure.Status != "True" || failure.Reason != EventFailedCreate {
		t.Errorf("conditions = %+v, want Failure=True FailedCreate", st.Conditions)
	}
	// Once a VMI exists the condition goes.
	vm := testVM(v1.RunStrategyAlways)
	vm.Status = st
	if got := Plan(Observed{VM: vm, VMI: testVMI(v1.Pending), Now: t0}).Status.Conditions; hasFailure(got) {
		t.Errorf("Failure kept with a VMI: %+v", got)
	}
}

func hasFailure(conds []v1.VirtualMachineCondition) bool {
	for _, c := range conds {
		if c.Type == v1.VirtualMachineFailure {
			return true
		}
	}
	return false
}

func TestSync_StartRequests(t *testing.T) {
	paused := v1.VirtualMachineStateChangeRequest{Action: v1.StartRequest,
		Data: map[string]string{v1.StartRequestDataPausedKey: v1.StartRequestDataPausedTrue}}
	t.Run("paused start creates a paused VMI", func(t *testing.T) {
		f := newFixture(t)
		f.addVM(testVM(v1.RunStrategyManual, withRequests(paused)))
		got := f.run("ns/vm")
		if diff := cmp.Diff([]action{{"create", "virtualmachineinstances", ""}, {"patch", "virtualmachines", "status"}}, summarize(got)); diff != "" {
			t.Fatalf("actions (-want +got):\n%s", diff)
		}
		vmi := got[0].(core.CreateAction).GetObject().(*v1.VirtualMachineInstance)
		if s := vmi.Spec.StartStrategy; s == nil || *s != v1.StartStrategyPaused {
			t.Errorf("startStrategy = %v, want Paused", s)
		}
		vm, _ := f.client.KubevirtV1().VirtualMachines("ns").Get(context.Background(), "vm", metav1.GetOptions{})
		if n := len(vm.Status.StateChangeRequests); n != 0 {
			t.Errorf("%d requests left after the create", n)
		}
	})
	for name, mod := range map[string]func(*v1.VirtualMachine){
		"runStrategy": func(*v1.VirtualMachine) {},
		"running":     func(vm *v1.VirtualMachine) { vm.Spec.RunStrategy, vm.Spec.Running = nil, ptrFalse() },
	} {
		t.Run("start on Halted VM with "+name, func(t *testing.T) {
			f := newFixture(t)
			f.addVM(testVM(v1.RunStrategyHalted, mod, withRequests(paused)))
			got := f.run("ns/vm")
			if len(got) == 0 || got[0].GetVerb() != "update" {
				t.Fatalf("actions = %v, want a spec update first", summarize(got))
			}
			vm := got[0].(core.UpdateAction).GetObject().(*v1.VirtualMachine)
			if s := vm.Spec.EffectiveRunStrategy(); s != v1.RunStrategyAlways {
				t.Errorf("strategy after the update = %s, want Always", s)
			}
			if (vm.Spec.Running != nil) != (name == "running") || (vm.Spec.RunStrategy != nil) != (name == "runStrategy") {
				t.Errorf("spec = running %v, runStrategy %v: the VM's own field must change", vm.Spec.Running, vm.Spec.RunStrategy)
			}
			if n := len(vm.Status.StateChangeRequests); n != 1 {
				t.Errorf("%d requests left, want the Start kept", n)
			}
		})
	}
	t.Run("rejected create keeps the Start", func(t *testing.T) {
		f := newFixture(t)
		f.addVM(testVM(v1.RunStrategyManual, withRequests(v1.VirtualMachineStateChangeRequest{Action: v1.StartRequest})))
		f.client = fake.NewSimpleClientset(f.objects...)
		f.client.PrependReactor("create", "virtualmachineinstances", func(core.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewInvalid(v1.SchemeGroupVersion.WithKind("VirtualMachineInstance").GroupKind(), "vm", nil)
		})
		c := New(Deps{
			VMs: listers.NewVirtualMachineLister(f.vms), VMIs: listers.NewVirtualMachineInstanceLister(f.vmis),
			Client: f.client.KubevirtV1(), Recorder: record.NewFakeRecorder(10), Now: func() time.Time { return t0 },
		})
		if err := c.Sync(context.Background(), "ns/vm"); err != nil {
			t.Fatal(err)
		}
		vm, _ := f.client.KubevirtV1().VirtualMachines("ns").Get(context.Background(), "vm", metav1.GetOptions{})
		if n := len(vm.Status.StateChangeRequests); n != 1 || !hasFailure(vm.Status.Conditions) {
			t.Errorf("requests %v, conditions %v: want the Start kept and Failure set", vm.Status.StateChangeRequests, vm.Status.Conditions)
		}
	})
}

func ptrFalse() *bool { b := false; return &b }
