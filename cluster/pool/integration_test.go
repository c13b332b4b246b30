package pool_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	poolv1 "github.com/nodevirt/nodevirt/cluster/api/pool/v1alpha1"
	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/cluster/client/clientset/versioned"
	kvinformers "github.com/nodevirt/nodevirt/cluster/client/informers/externalversions"
	"github.com/nodevirt/nodevirt/cluster/pool"
	"github.com/nodevirt/nodevirt/cluster/reconcile"
	"github.com/nodevirt/nodevirt/hack/testenv"
	"github.com/nodevirt/nodevirt/hack/testenv/apiserver"
)

// env is a real API server with the pool controller running in-process.
// The test plays the VM controller (the VM Ready condition) and the
// garbage collector (it finishes foreground deletions).
type env struct {
	kv versioned.Interface
	ns string
}

func startEnv(t *testing.T) *env {
	t.Helper()
	api := apiserver.Start(t)
	kube := kubernetes.NewForConfigOrDie(api.Config)
	kv := versioned.NewForConfigOrDie(api.Config)
	const ns = "pools"
	if _, err := kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	factory := kvinformers.NewSharedInformerFactoryWithOptions(kv, 0, kvinformers.WithNamespace(ns))
	pools, vms, vmis := factory.Pool().V1alpha1().VirtualMachinePools(), factory.Kubevirt().V1().VirtualMachines(), factory.Kubevirt().V1().VirtualMachineInstances()
	ctl := pool.New(pool.Deps{
		Pools: pools.Lister(), VMs: vms.Lister(), VMIs: vmis.Lister(), VMAPI: kv.KubevirtV1(), VMIAPI: kv.KubevirtV1(),
		PoolAPI: kv.PoolV1alpha1(), Recorder: record.NewFakeRecorder(1000),
	})
	loop := reconcile.New("pool", ctl, testenv.Logger(t), nil)
	for _, h := range []struct {
		inf cache.SharedIndexInformer
		h   cache.ResourceEventHandler
	}{{pools.Informer(), loop.Handler()}, {vms.Informer(), ctl.VMHandler(loop.EnqueueKey)}, {vmis.Informer(), ctl.VMIHandler(loop.EnqueueKey)}} {
		if _, err := h.inf.AddEventHandler(h.h); err != nil {
			t.Fatal(err)
		}
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	done := make(chan struct{})
	go func() { loop.Run(ctx, 2); close(done) }()
	t.Cleanup(func() { cancel(); <-done; factory.Shutdown() })
	return &env{kv: kv, ns: ns}
}

func newPool(name string, replicas int32) *poolv1.VirtualMachinePool {
	mem := resource.MustParse("128Mi")
	labels := map[string]string{"kubevirt.io/vmpool": name}
	return &poolv1.VirtualMachinePool{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: poolv1.VirtualMachinePoolSpec{
			Replicas: ptr.To(replicas),
			Selector: &v1.LabelSelector{MatchLabels: map[string]v1.LabelValue{"kubevirt.io/vmpool": v1.LabelValue(name)}},
			VirtualMachineTemplate: &poolv1.VirtualMachineTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: v1.VirtualMachineSpec{RunStrategy: ptr.To(v1.RunStrategyAlways), Template: &v1.VirtualMachineInstanceTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec:       v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{Memory: &v1.Memory{Guest: &mem}}},
				}},
			},
		},
	}
}

// waitVMs waits until the pool's live VMs are exactly names and its status
// says len(names) replicas, ready of them ready; it plays the garbage
// collector for VMs deleted in the foreground.
func (e *env) waitVMs(t *testing.T, p *poolv1.VirtualMachinePool, ready int32, names ...string) {
	t.Helper()
	ctx := context.Background()
	testenv.Eventually(t, 30*time.Second, fmt.Sprintf("pool %s VMs %v (%d ready)", p.Name, names, ready), func() (bool, error) {
		list, err := e.kv.KubevirtV1().VirtualMachines(e.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		var got []string
		for _, vm := range list.Items {
			if vm.DeletionTimestamp != nil {
				vm.Finalizers = nil // the garbage collector's part of a foreground deletion
				_, _ = e.kv.KubevirtV1().VirtualMachines(e.ns).Update(ctx, &vm, metav1.UpdateOptions{})
				continue
			}
			if ref := metav1.GetControllerOf(&vm); ref != nil && ref.UID == p.UID {
				got = append(got, vm.Name)
			}
		}
		slices.Sort(got)
		cur, err := e.kv.PoolV1alpha1().VirtualMachinePools(e.ns).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		s := cur.Status
		return slices.Equal(got, names) && s.Replicas == int32(len(names)) && s.ReadyReplicas == ready,
			fmt.Errorf("VMs %v, status %+v", got, s)
	})
}

func (e *env) setReady(t *testing.T, name string) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, "vm "+name+" ready", func() error {
		vm, err := e.kv.KubevirtV1().VirtualMachines(e.ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		vm.Status.Ready = true
		vm.Status.Conditions = []v1.VirtualMachineCondition{{Type: v1.VirtualMachineReady, Status: corev1.ConditionTrue}}
		_, err = e.kv.KubevirtV1().VirtualMachines(e.ns).UpdateStatus(context.Background(), vm, metav1.UpdateOptions{})
		return err
	})
}

func (e *env) scalePatch(t *testing.T, name string, replicas int) {
	t.Helper()
	_, err := e.kv.PoolV1alpha1().RESTClient().Patch(types.MergePatchType).Namespace(e.ns).
		Resource("virtualmachinepools").Name(name).SubResource("scale").
		Body([]byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas))).Do(context.Background()).Raw()
	if err != nil {
		t.Fatalf("scale %s to %d: %v", name, replicas, err)
	}
}

func TestPool(t *testing.T) {
	e := startEnv(t)
	ctx := context.Background()
	pools := e.kv.PoolV1alpha1().VirtualMachinePools(e.ns)
	db := newPool("db", 0)
	descending := poolv1.VirtualMachinePoolBasePolicyDescendingOrder
	db.Spec.ScaleInStrategy = &poolv1.VirtualMachinePoolScaleInStrategy{Proactive: &poolv1.VirtualMachinePoolProactiveScaleInStrategy{
		SelectionPolicy: &poolv1.VirtualMachinePoolSelectionPolicy{BasePolicy: &descending}}}
	db.Spec.NameGeneration = &poolv1.VirtualMachinePoolNameGeneration{AppendIndexToConfigMapRefs: ptr.To(true), AppendIndexToSecretRefs: ptr.To(true)}
	p, err := pools.Create(ctx, db, metav1.CreateOptions{FieldValidation: "Strict"})
	if err != nil {
		t.Fatal(err)
	}
	e.waitVMs(t, p, 0)

	e.scalePatch(t, "db", 3)
	e.waitVMs(t, p, 0, "db-0", "db-1", "db-2")
	vm, err := e.kv.KubevirtV1().VirtualMachines(e.ns).Get(ctx, "db-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ref := metav1.GetControllerOf(vm); ref.Kind != poolv1.VirtualMachinePoolKind || !ptr.Deref(ref.BlockOwnerDeletion, false) ||
		vm.Spec.EffectiveRunStrategy() != v1.RunStrategyAlways || vm.Labels["kubevirt.io/vmpool"] != "db" {
		t.Errorf("db-1 is not the pool's VM: owner %+v, spec %+v, labels %v", ref, vm.Spec, vm.Labels)
	}
	for _, n := range []string{"db-0", "db-1", "db-2"} {
		e.setReady(t, n)
	}
	e.waitVMs(t, p, 3, "db-0", "db-1", "db-2")
	scale, err := pools.GetScale(ctx, "db", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if scale.Status.Replicas != 3 || scale.Status.Selector != "kubevirt.io/vmpool=db" {
		t.Errorf("scale status %+v, want 3 replicas, selector kubevirt.io/vmpool=db", scale.Status)
	}

	// Scale-in removes the highest indexes (DescendingOrder).
	scale.Spec.Replicas = 1
	if _, err := pools.UpdateScale(ctx, "db", scale, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitVMs(t, p, 1, "db-0")

	// A lost VM is recreated under the lowest free index.
	e.scalePatch(t, "db", 2)
	e.waitVMs(t, p, 1, "db-0", "db-1")
	if err := e.kv.KubevirtV1().VirtualMachines(e.ns).Delete(ctx, "db-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitVMs(t, p, 0, "db-0", "db-1")

	t.Run("PauseHonoured", func(t *testing.T) {
		if _, err := pools.Patch(ctx, "db", types.MergePatchType, []byte(`{"spec":{"paused":true}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, 30*time.Second, "ReplicaPaused", func() (bool, error) {
			got, err := pools.Get(ctx, "db", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			for _, c := range got.Status.Conditions {
				if c.Type == poolv1.VirtualMachinePoolReplicaPaused && c.Status == corev1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		e.scalePatch(t, "db", 3)
		deadline := time.Now().Add(2 * time.Second)
		for time.Now().Before(deadline) {
			if _, err := e.kv.KubevirtV1().VirtualMachines(e.ns).Get(ctx, "db-2", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Fatalf("paused pool created db-2 (err %v)", err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if _, err := pools.Patch(ctx, "db", types.MergePatchType, []byte(`{"spec":{"paused":false}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		e.waitVMs(t, p, 0, "db-0", "db-1", "db-2")
	})

	t.Run("Rollout", func(t *testing.T) { e.testRollout(t) })

	t.Run("ScaleInRandomByDefault", func(t *testing.T) {
		r, err := pools.Create(ctx, newPool("web", 4), metav1.CreateOptions{FieldValidation: "Strict"})
		if err != nil {
			t.Fatal(err)
		}
		all := []string{"web-0", "web-1", "web-2", "web-3"}
		e.waitVMs(t, r, 0, all...)
		e.scalePatch(t, "web", 2)
		var left []string
		testenv.Eventually(t, 30*time.Second, "web scaled in to 2", func() (bool, error) {
			left = left[:0]
			list, err := e.kv.KubevirtV1().VirtualMachines(e.ns).List(ctx, metav1.ListOptions{LabelSelector: "kubevirt.io/vmpool=web"})
			if err != nil {
				return false, err
			}
			for _, vm := range list.Items {
				if vm.DeletionTimestamp == nil {
					left = append(left, vm.Name)
				}
			}
			return len(left) == 2, fmt.Errorf("VMs left: %v", left)
		})
		slices.Sort(left)
		e.waitVMs(t, r, 0, left...)
		t.Logf("random scale-in kept %v of %v", left, all)
	})

	t.Run("Validation", func(t *testing.T) {
		oldest := newPool("oldest", 1)
		policy := poolv1.VirtualMachinePoolBasePolicy("Oldest")
		oldest.Spec.ScaleInStrategy = &poolv1.VirtualMachinePoolScaleInStrategy{Proactive: &poolv1.VirtualMachinePoolProactiveScaleInStrategy{
			SelectionPolicy: &poolv1.VirtualMachinePoolSelectionPolicy{BasePolicy: &policy}}}
		_, err := pools.Create(ctx, oldest, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.scaleInStrategy.proactive.selectionPolicy.basePolicy") {
			t.Errorf("basePolicy Oldest: err %v, want Invalid naming spec.scaleInStrategy.proactive.selectionPolicy.basePolicy", err)
		}
		bad := newPool("bad-unavailable", 1)
		bad.Spec.MaxUnavailable = ptr.To(intstr.FromString("half"))
		_, err = pools.Create(ctx, bad, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.maxUnavailable") {
			t.Errorf("maxUnavailable half: err %v, want Invalid naming spec.maxUnavailable", err)
		}

		bad = newPool("bad", 1)
		bad.Spec.VirtualMachineTemplate.ObjectMeta.Labels = map[string]string{"app": "other"}
		_, err = pools.Create(ctx, bad, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.selector") {
			t.Errorf("selector not matching the template: err %v, want Invalid naming spec.selector", err)
		}
	})
}

// testRollout: a template change reaches a pool of three running VMs with
// maxUnavailable 1. The VMs get the new template at once; their VMIs are
// restarted one at a time, the next only once the replaced one is ready.
// The test plays the VM controller: it runs a VMI for each VM, made from
// the VM's template, and starts a new one a while after one is deleted.
func (e *env) testRollout(t *testing.T) {
	ctx := context.Background()
	pools := e.kv.PoolV1alpha1().VirtualMachinePools(e.ns)
	r := newPool("roll", 3)
	r.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(1))
	r, err := pools.Create(ctx, r, metav1.CreateOptions{FieldValidation: "Strict"})
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"roll-0", "roll-1", "roll-2"}
	e.waitVMs(t, r, 0, names...)
	oldRev := pool.Revision(r)
	for _, n := range names {
		vm, err := e.kv.KubevirtV1().VirtualMachines(e.ns).Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if vm.Labels[v1.VirtualMachinePoolRevisionName] != oldRev || vm.Spec.Template.ObjectMeta.Labels[v1.VirtualMachinePoolRevisionName] != oldRev {
			t.Fatalf("VM %s: labels %v, template labels %v; want revision %s on both", n, vm.Labels, vm.Spec.Template.ObjectMeta.Labels, oldRev)
		}
		e.runVMI(t, vm)
		e.setReady(t, n)
	}
	e.waitVMs(t, r, 3, names...)

	if _, err := pools.Patch(ctx, "roll", types.MergePatchType,
		[]byte(`{"spec":{"virtualMachineTemplate":{"spec":{"template":{"spec":{"domain":{"memory":{"guest":"256Mi"}}}}}}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	cur, err := pools.Get(ctx, "roll", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	newRev := pool.Revision(cur)
	if newRev == oldRev {
		t.Fatalf("the template change kept revision %s", oldRev)
	}
	restarted, maxDown := 0, 0
	testenv.Eventually(t, 60*time.Second, "every VMI at revision "+newRev, func() (bool, error) {
		vms, err := e.kv.KubevirtV1().VirtualMachines(e.ns).List(ctx, metav1.ListOptions{LabelSelector: "kubevirt.io/vmpool=roll"})
		if err != nil {
			return false, err
		}
		current := 0
		var down []*v1.VirtualMachine
		for i := range vms.Items {
			vm := &vms.Items[i]
			if vm.Labels[v1.VirtualMachinePoolRevisionName] != newRev || vm.Spec.Template.Spec.Domain.Memory.Guest.String() != "256Mi" {
				continue // not updated yet
			}
			vmi, err := e.kv.KubevirtV1().VirtualMachineInstances(e.ns).Get(ctx, vm.Name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				down = append(down, vm)
			case err != nil:
				return false, err
			case vmi.Labels[v1.VirtualMachinePoolRevisionName] == newRev:
				current++
			}
		}
		maxDown = max(maxDown, len(down))
		for _, vm := range down {
			time.Sleep(500 * time.Millisecond) // a restart takes a while: the controller must wait for it
			e.runVMI(t, vm)
			restarted++
		}
		return current == len(names), fmt.Errorf("%d of %d VMIs at %s, %d down", current, len(names), newRev, len(down))
	})
	if restarted != len(names) || maxDown > 1 {
		t.Errorf("%d VMIs restarted, at most %d down at once; want %d, at most 1 (maxUnavailable)", restarted, maxDown, len(names))
	}
}

// runVMI plays the VM controller and the node: a VMI of vm, made from its
// template, Running and Ready.
func (e *env) runVMI(t *testing.T, vm *v1.VirtualMachine) {
	t.Helper()
	ctx := context.Background()
	vmi := &v1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{
			Name: vm.Name, Namespace: e.ns, Labels: vm.Spec.Template.ObjectMeta.Labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(vm, v1.SchemeGroupVersion.WithKind(v1.KindVM))},
		},
		Spec: vm.Spec.Template.Spec,
	}
	vmi, err := e.kv.KubevirtV1().VirtualMachineInstances(e.ns).Create(ctx, vmi, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create VMI %s: %v", vm.Name, err)
	}
	for _, phase := range []v1.VirtualMachineInstancePhase{v1.Scheduled, v1.Running} { // the phase table's steps
		vmi.Status.Phase = phase
		if phase == v1.Running {
			vmi.Status.Conditions = []v1.VirtualMachineInstanceCondition{{Type: v1.VirtualMachineInstanceReady, Status: corev1.ConditionTrue}}
		}
		if vmi, err = e.kv.KubevirtV1().VirtualMachineInstances(e.ns).UpdateStatus(ctx, vmi, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("VMI %s status: %v", vm.Name, err)
		}
	}
}
