package instancetype_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/yaml"

	itv1beta1 "github.com/nodevirt/nodevirt/cluster/api/instancetype/v1beta1"
	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/cluster/client/clientset/versioned"
	kvinformers "github.com/nodevirt/nodevirt/cluster/client/informers/externalversions"
	"github.com/nodevirt/nodevirt/cluster/instancetype"
	"github.com/nodevirt/nodevirt/cluster/reconcile"
	vmctl "github.com/nodevirt/nodevirt/cluster/vm"
	"github.com/nodevirt/nodevirt/hack/testenv"
	"github.com/nodevirt/nodevirt/hack/testenv/apiserver"
)

const ns = "examples"

// env is a real API server with the VM controller (and its instancetype
// Revisions) running in-process; the test plays the user and the agent.
type env struct {
	kv   versioned.Interface
	kube kubernetes.Interface
	dyn  dynamic.Interface
}

func startEnv(t *testing.T) *env {
	t.Helper()
	api := apiserver.Start(t)
	e := &env{kv: versioned.NewForConfigOrDie(api.Config), kube: kubernetes.NewForConfigOrDie(api.Config), dyn: dynamic.NewForConfigOrDie(api.Config)}
	if _, err := e.kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	factory := kvinformers.NewSharedInformerFactoryWithOptions(e.kv, 0, kvinformers.WithNamespace(ns))
	vms, vmis := factory.Kubevirt().V1().VirtualMachines(), factory.Kubevirt().V1().VirtualMachineInstances()
	loop := reconcile.New("vm", nil, testenv.Logger(t), nil)
	recorder := record.NewFakeRecorder(10000)
	loop.SetSyncer(vmctl.New(vmctl.Deps{
		VMs: vms.Lister(), VMIs: vmis.Lister(), Client: e.kv.KubevirtV1(), Recorder: recorder, Queue: loop,
		Instancetypes: instancetype.New(instancetype.Deps{Client: e.kv.InstancetypeV1beta1(), Revisions: e.kube.AppsV1(), Recorder: recorder}),
	}))
	for _, inf := range []cache.SharedIndexInformer{vms.Informer(), vmis.Informer()} {
		if _, err := inf.AddEventHandler(loop.Handler()); err != nil {
			t.Fatal(err)
		}
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	done := make(chan struct{})
	go func() { loop.Run(ctx, 2); close(done) }()
	t.Cleanup(func() { cancel(); <-done; factory.Shutdown() })
	return e
}

var resources = map[string]schema.GroupVersionResource{
	"VirtualMachineInstancetype":        itv1beta1.SchemeGroupVersion.WithResource("virtualmachineinstancetypes"),
	"VirtualMachineClusterInstancetype": itv1beta1.SchemeGroupVersion.WithResource("virtualmachineclusterinstancetypes"),
	"VirtualMachinePreference":          itv1beta1.SchemeGroupVersion.WithResource("virtualmachinepreferences"),
	"VirtualMachineClusterPreference":   itv1beta1.SchemeGroupVersion.WithResource("virtualmachineclusterpreferences"),
	"VirtualMachine":                    v1.SchemeGroupVersion.WithResource("virtualmachines"),
}

// apply server-side applies a manifest as `kubectl apply --server-side`
// does, with strict field validation.
func (e *env) apply(manifest []byte) error {
	var obj unstructured.Unstructured
	if err := yaml.Unmarshal(manifest, &obj.Object); err != nil {
		return err
	}
	body, err := json.Marshal(obj.Object)
	if err != nil {
		return err
	}
	gvr := resources[obj.GetKind()]
	var ri dynamic.ResourceInterface = e.dyn.Resource(gvr)
	if !strings.Contains(obj.GetKind(), "Cluster") {
		ri = e.dyn.Resource(gvr).Namespace(ns)
	}
	_, err = ri.Patch(context.Background(), obj.GetName(), types.ApplyPatchType, body,
		metav1.PatchOptions{FieldManager: "kubectl", Force: ptrTo(true), FieldValidation: "Strict"})
	return err
}

func ptrTo[T any](v T) *T { return &v }

func (e *env) patchVM(t *testing.T, name string, ops ...map[string]any) {
	t.Helper()
	b, _ := json.Marshal(ops)
	if _, err := e.kv.KubevirtV1().VirtualMachines(ns).Patch(context.Background(), name, types.JSONPatchType, b, metav1.PatchOptions{}); err != nil {
		t.Fatalf("patch vm %s: %v", name, err)
	}
}

// start removes the template's memory (KubeVirt's example VMs set
// memory.guest, which conflicts with their instancetype there too) and
// sets runStrategy Always.
func (e *env) start(t *testing.T, name string, dropMemory bool) {
	ops := []map[string]any{{"op": "replace", "path": "/spec/runStrategy", "value": "Always"}}
	if dropMemory {
		ops = append(ops, map[string]any{"op": "remove", "path": "/spec/template/spec/domain/memory"})
	}
	e.patchVM(t, name, ops...)
}

func (e *env) waitVM(t *testing.T, name, what string, cond func(*v1.VirtualMachine) bool) *v1.VirtualMachine {
	t.Helper()
	var got *v1.VirtualMachine
	testenv.Eventually(t, 60*time.Second, "vm "+name+": "+what, func() (bool, error) {
		vm, err := e.kv.KubevirtV1().VirtualMachines(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		got = vm
		return cond(vm), nil
	})
	return got
}

func (e *env) waitVMI(t *testing.T, name string, not types.UID) *v1.VirtualMachineInstance {
	t.Helper()
	var got *v1.VirtualMachineInstance
	testenv.Eventually(t, 60*time.Second, "vmi "+name, func() (bool, error) {
		vmi, err := e.kv.KubevirtV1().VirtualMachineInstances(ns).Get(context.Background(), name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		got = vmi
		return vmi.UID != not && vmi.DeletionTimestamp == nil, nil
	})
	return got
}

// stop halts the VM and plays the agent releasing its VMI.
func (e *env) stop(t *testing.T, name string) {
	t.Helper()
	e.patchVM(t, name, map[string]any{"op": "replace", "path": "/spec/runStrategy", "value": "Halted"})
	testenv.Eventually(t, 60*time.Second, "vmi "+name+" gone", func() (bool, error) {
		v, err := e.kv.KubevirtV1().VirtualMachineInstances(ns).Get(context.Background(), name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil || v.DeletionTimestamp == nil {
			return false, err
		}
		v.Finalizers = nil
		_, err = e.kv.KubevirtV1().VirtualMachineInstances(ns).Update(context.Background(), v, metav1.UpdateOptions{})
		return false, err
	})
}

func failure(vm *v1.VirtualMachine) *v1.VirtualMachineCondition {
	for i, c := range vm.Status.Conditions {
		if c.Type == v1.VirtualMachineFailure && c.Status == corev1.ConditionTrue {
			return &vm.Status.Conditions[i]
		}
	}
	return nil
}

func hasRevision(ref *v1.InstancetypeStatusRef) bool {
	return ref != nil && ref.ControllerRevisionRef != nil && ref.ControllerRevisionRef.Name != ""
}

func checkCPUMemory(t *testing.T, vmi *v1.VirtualMachineInstance, sockets uint32, mem string) {
	t.Helper()
	cpu := vmi.Spec.Domain.CPU
	if cpu == nil || cpu.Sockets != sockets || cpu.Cores != 1 || cpu.Threads != 1 {
		t.Errorf("vmi %s cpu = %+v, want %d sockets × 1 core × 1 thread", vmi.Name, cpu, sockets)
	}
	if m := vmi.Spec.Domain.Memory; m == nil || m.Guest == nil || m.Guest.Cmp(resource.MustParse(mem)) != 0 {
		t.Errorf("vmi %s memory = %+v, want guest %s", vmi.Name, m, mem)
	}
}

// TestExamples applies KubeVirt's own instancetype, preference and VM
// examples unchanged, then starts VMs from them.
func TestExamples(t *testing.T) {
	examples := testenv.KubeVirtExamples(t)
	e := startEnv(t)
	for _, f := range []string{
		"clarge.yaml", "csmall.yaml", "cluster-csmall.yaml", "virtio.yaml", "windows.yaml",
		"vm-cirros-clarge.yaml", "vm-cirros-clarge-virtio.yaml", "vm-cirros-clarge-windows.yaml",
		"vm-cirros-csmall.yaml", "vm-cirros-cluster-csmall.yaml", "vm-windows-clarge-windows.yaml",
	} {
		manifest, err := os.ReadFile(filepath.Join(examples, f))
		if err != nil {
			t.Fatal(err)
		}
		err = e.apply(manifest)
		if f == "vm-windows-clarge-windows.yaml" && err != nil && strings.Contains(err.Error(), "firmware.uuid") {
			t.Logf("%s: %v (firmware.uuid is not a nodevirt VMI field on this branch)", f, err)
			continue
		}
		if err != nil {
			t.Fatalf("apply %s unchanged: %v", f, err)
		}
	}

	t.Run("ExampleVMConflictsOnMemory", func(t *testing.T) {
		// As on KubeVirt: the example VMs set memory.guest beside an
		// instancetype, which is a conflict naming the field.
		vm := e.waitVM(t, "vm-cirros-clarge", "Failure condition", func(vm *v1.VirtualMachine) bool { return failure(vm) != nil })
		c := failure(vm)
		if want := "VM field(s) spec.template.spec.domain.memory conflicts with selected instance type"; c.Message != want || c.Reason != vmctl.ReasonFailedInstancetype {
			t.Errorf("Failure = %s %q, want %s %q", c.Reason, c.Message, vmctl.ReasonFailedInstancetype, want)
		}
		e.patchVM(t, "vm-cirros-clarge", map[string]any{"op": "replace", "path": "/spec/runStrategy", "value": "Always"})
		time.Sleep(2 * time.Second) // a VMI would have been created by now
		if _, err := e.kv.KubevirtV1().VirtualMachineInstances(ns).Get(context.Background(), "vm-cirros-clarge", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("a conflicting VM got a VMI (err %v)", err)
		}
	})

	t.Run("WindowsPreference", func(t *testing.T) {
		const name = "vm-cirros-clarge-windows"
		e.start(t, name, true)
		vmi := e.waitVMI(t, name, "")
		checkCPUMemory(t, vmi, 4, "2Gi")
		for _, d := range vmi.Spec.Domain.Devices.Disks {
			if d.Disk == nil || d.Disk.Bus != v1.DiskBusSATA {
				t.Errorf("disk %s = %+v, want the preferred sata bus", d.Name, d.Disk)
			}
		}
		vm := e.waitVM(t, name, "status refs", func(vm *v1.VirtualMachine) bool {
			return hasRevision(vm.Status.InstancetypeRef) && hasRevision(vm.Status.PreferenceRef) && failure(vm) == nil
		})
		if r := vm.Status.InstancetypeRef; r.Name != "clarge" || r.Kind != itv1beta1.InstancetypeKind {
			t.Errorf("instancetypeRef = %+v", r)
		}
		if r := vm.Status.PreferenceRef; r.Name != "windows" || r.Kind != itv1beta1.PreferenceKind {
			t.Errorf("preferenceRef = %+v", r)
		}
		for _, ref := range []*v1.InstancetypeStatusRef{vm.Status.InstancetypeRef, vm.Status.PreferenceRef} {
			cr, err := e.kube.AppsV1().ControllerRevisions(ns).Get(context.Background(), ref.ControllerRevisionRef.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("controllerrevision of %s: %v", ref.Name, err)
			}
			if o := metav1.GetControllerOf(cr); o == nil || o.UID != vm.UID {
				t.Errorf("controllerrevision %s is not controlled by the VM: %+v", cr.Name, cr.OwnerReferences)
			}
			if !strings.HasPrefix(cr.Name, name+"-"+ref.Name+"-v1beta1-") || cr.Labels[instancetype.LabelObjectName] != ref.Name {
				t.Errorf("controllerrevision %s labels %v", cr.Name, cr.Labels)
			}
		}
	})

	t.Run("VirtioPreferenceAndClusterInstancetype", func(t *testing.T) {
		e.start(t, "vm-cirros-clarge-virtio", true)
		e.start(t, "vm-cirros-cluster-csmall", true)
		vmi := e.waitVMI(t, "vm-cirros-clarge-virtio", "")
		checkCPUMemory(t, vmi, 4, "2Gi")
		for _, d := range vmi.Spec.Domain.Devices.Disks {
			if d.Disk == nil || d.Disk.Bus != v1.DiskBusVirtio {
				t.Errorf("disk %s = %+v, want the preferred virtio bus", d.Name, d.Disk)
			}
		}
		checkCPUMemory(t, e.waitVMI(t, "vm-cirros-cluster-csmall", ""), 1, "128Mi")
		vm := e.waitVM(t, "vm-cirros-cluster-csmall", "instancetypeRef", func(vm *v1.VirtualMachine) bool { return hasRevision(vm.Status.InstancetypeRef) })
		if k := vm.Status.InstancetypeRef.Kind; k != itv1beta1.ClusterInstancetypeKind {
			t.Errorf("instancetypeRef.kind = %q", k)
		}
	})

	t.Run("EditedInstancetypeKeepsRevision", func(t *testing.T) {
		const name = "vm-cirros-csmall"
		e.start(t, name, true)
		first := e.waitVMI(t, name, "")
		checkCPUMemory(t, first, 1, "128Mi")
		e.waitVM(t, name, "instancetypeRef", func(vm *v1.VirtualMachine) bool { return hasRevision(vm.Status.InstancetypeRef) })
		edited := "apiVersion: instancetype.kubevirt.io/v1beta1\nkind: VirtualMachineInstancetype\nmetadata:\n  name: csmall\nspec:\n  cpu:\n    guest: 2\n  memory:\n    guest: 256Mi\n"
		if err := e.apply([]byte(edited)); err != nil {
			t.Fatal(err)
		}
		e.stop(t, name)
		e.start(t, name, false)
		checkCPUMemory(t, e.waitVMI(t, name, first.UID), 1, "128Mi")

		// A VM created now captures the edited instancetype.
		manifest, err := os.ReadFile(filepath.Join(examples, "vm-cirros-csmall.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if err := e.apply([]byte(strings.ReplaceAll(string(manifest), "name: vm-cirros-csmall", "name: vm-cirros-csmall-2"))); err != nil {
			t.Fatal(err)
		}
		e.start(t, "vm-cirros-csmall-2", true)
		checkCPUMemory(t, e.waitVMI(t, "vm-cirros-csmall-2", ""), 2, "256Mi")
	})

	t.Run("MissingInstancetype", func(t *testing.T) {
		const name = "vm-missing"
		vmYAML := "apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata:\n  name: vm-missing\nspec:\n  runStrategy: Always\n" +
			"  instancetype:\n    kind: VirtualMachineInstancetype\n    name: late\n  template:\n    spec:\n      domain:\n        devices: {}\n"
		if err := e.apply([]byte(vmYAML)); err != nil {
			t.Fatalf("a VM naming an instancetype needs no memory: %v", err)
		}
		vm := e.waitVM(t, name, "Failure condition", func(vm *v1.VirtualMachine) bool { return failure(vm) != nil })
		if c := failure(vm); c.Reason != vmctl.ReasonFailedFindInstancetype || !strings.Contains(c.Message, "VirtualMachineInstancetype examples/late not found") {
			t.Errorf("Failure = %s %q", c.Reason, c.Message)
		}
		if _, err := e.kv.KubevirtV1().VirtualMachineInstances(ns).Get(context.Background(), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("VM with a missing instancetype got a VMI (err %v)", err)
		}
		late := "apiVersion: instancetype.kubevirt.io/v1beta1\nkind: VirtualMachineInstancetype\nmetadata:\n  name: late\nspec:\n  cpu:\n    guest: 2\n  memory:\n    guest: 64Mi\n"
		if err := e.apply([]byte(late)); err != nil {
			t.Fatal(err)
		}
		checkCPUMemory(t, e.waitVMI(t, name, ""), 2, "64Mi")
		e.waitVM(t, name, "Failure cleared", func(vm *v1.VirtualMachine) bool { return failure(vm) == nil })
	})

	t.Run("Refused", func(t *testing.T) {
		for _, tc := range []struct{ manifest, want string }{{
			"apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata:\n  name: vm-infer\nspec:\n  instancetype:\n    inferFromVolume: root\n  template:\n    spec:\n      domain:\n        devices: {}\n",
			"spec.instancetype.inferFromVolume is not supported by nodevirt: inferring needs CDI",
		}, {
			"apiVersion: instancetype.kubevirt.io/v1beta1\nkind: VirtualMachineInstancetype\nmetadata:\n  name: hugepages\nspec:\n  cpu:\n    guest: 2\n  memory:\n    guest: 1Gi\n    hugepages:\n      pageSize: 2Mi\n",
			"hugepages",
		}, {
			"apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata:\n  name: vm-nomem\nspec:\n  template:\n    spec:\n      domain:\n        devices: {}\n",
			"guest memory is not set",
		}} {
			err := e.apply([]byte(tc.manifest))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("apply:\n%s\nerr = %v, want it to mention %q", tc.manifest, err, tc.want)
			}
		}
	})
}
