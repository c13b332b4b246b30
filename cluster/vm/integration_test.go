package vm_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/cluster/client/clientset/versioned"
	kvinformers "github.com/nodevirt/nodevirt/cluster/client/informers/externalversions"
	listers "github.com/nodevirt/nodevirt/cluster/client/listers/api/v1"
	"github.com/nodevirt/nodevirt/cluster/reconcile"
	"github.com/nodevirt/nodevirt/cluster/vm"
	"github.com/nodevirt/nodevirt/hack/testenv"
	"github.com/nodevirt/nodevirt/hack/testenv/apiserver"
)

// env is a real API server with the VM controller running in-process on
// informers, as nodevirt-controller wires it. The test plays nodevirt-api
// (appending requests the way KubeVirt's virt-api does: a JSON patch
// testing the list it extends) and the node agent (phases, finalizer).
type env struct {
	kv   versioned.Interface
	kube kubernetes.Interface
	ns   string
}

func startEnv(t *testing.T) *env {
	t.Helper()
	api := apiserver.Start(t)
	kube := kubernetes.NewForConfigOrDie(api.Config)
	kv := versioned.NewForConfigOrDie(api.Config)
	const ns = "requests"
	if _, err := kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	factory := kvinformers.NewSharedInformerFactoryWithOptions(kv, 0, kvinformers.WithNamespace(ns))
	vms, vmis := factory.Kubevirt().V1().VirtualMachines(), factory.Kubevirt().V1().VirtualMachineInstances()
	loop := reconcile.New("vm", nil, testenv.Logger(t), nil)
	loop.SetSyncer(vm.New(vm.Deps{
		VMs: vms.Lister(), VMIs: vmis.Lister(), Client: kv.KubevirtV1(),
		Recorder: record.NewFakeRecorder(1000), Queue: loop,
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
	return &env{kv: kv, kube: kube, ns: ns}
}

func newVM(name string, strategy v1.VirtualMachineRunStrategy) *v1.VirtualMachine {
	mem := resource.MustParse("128Mi")
	return &v1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.VirtualMachineSpec{RunStrategy: ptr.To(strategy), Template: &v1.VirtualMachineInstanceTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
			Spec:       v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{Memory: &v1.Memory{Guest: &mem}}},
		}},
	}
}

func (e *env) createVM(t *testing.T, vm *v1.VirtualMachine) {
	t.Helper()
	if _, err := e.kv.KubevirtV1().VirtualMachines(e.ns).Create(context.Background(), vm, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create vm %s: %v", vm.Name, err)
	}
}

func (e *env) getVM(name string) (*v1.VirtualMachine, error) {
	return e.kv.KubevirtV1().VirtualMachines(e.ns).Get(context.Background(), name, metav1.GetOptions{})
}

func (e *env) getVMI(name string) (*v1.VirtualMachineInstance, error) {
	return e.kv.KubevirtV1().VirtualMachineInstances(e.ns).Get(context.Background(), name, metav1.GetOptions{})
}

// appendRequests plays nodevirt-api: a JSON patch of the status
// subresource that tests the list it extends, so an append racing with the
// controller's removal fails instead of losing either; it retries on that.
func (e *env) appendRequests(t *testing.T, name string, reqs ...v1.VirtualMachineStateChangeRequest) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, "append state change requests", func() (bool, error) {
		vm, err := e.getVM(name)
		if err != nil {
			return false, err
		}
		all := append(vm.Status.StateChangeRequests, reqs...)
		var ops []map[string]any
		switch {
		case equality.Semantic.DeepEqual(vm.Status, v1.VirtualMachineStatus{}):
			// No status yet: add it whole, unless someone wrote one since.
			ops = []map[string]any{
				{"op": "test", "path": "/metadata/resourceVersion", "value": vm.ResourceVersion},
				{"op": "add", "path": "/status", "value": v1.VirtualMachineStatus{StateChangeRequests: all}},
			}
		case vm.Status.StateChangeRequests == nil:
			ops = []map[string]any{
				{"op": "test", "path": "/metadata/resourceVersion", "value": vm.ResourceVersion},
				{"op": "add", "path": "/status/stateChangeRequests", "value": all},
			}
		default:
			ops = []map[string]any{
				{"op": "test", "path": "/status/stateChangeRequests", "value": vm.Status.StateChangeRequests},
				{"op": "replace", "path": "/status/stateChangeRequests", "value": all},
			}
		}
		patch, err := json.Marshal(ops)
		if err != nil {
			return false, err
		}
		_, err = e.kv.KubevirtV1().VirtualMachines(e.ns).Patch(context.Background(), name, types.JSONPatchType, patch,
			metav1.PatchOptions{FieldManager: v1.ManagerAPI}, "status")
		if err != nil {
			t.Logf("append to %s lost a race, retrying: %v", name, err)
		}
		return err == nil, nil
	})
}

// waitVMI waits for a VMI named name whose UID is not old and that is not
// being deleted.
func (e *env) waitVMI(t *testing.T, name string, old types.UID) *v1.VirtualMachineInstance {
	t.Helper()
	var vmi *v1.VirtualMachineInstance
	testenv.Eventually(t, 30*time.Second, "vmi "+name+" created", func() (bool, error) {
		v, err := e.getVMI(name)
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		vmi = v
		return err == nil && v.UID != old && v.DeletionTimestamp == nil, err
	})
	return vmi
}

// setPhase plays the controllers and the agent moving the VMI along.
func (e *env) setPhase(t *testing.T, name string, phases ...v1.VirtualMachineInstancePhase) {
	t.Helper()
	for _, p := range phases {
		testenv.Eventually(t, 10*time.Second, fmt.Sprintf("vmi %s → %s", name, p), func() (bool, error) {
			v, err := e.getVMI(name)
			if err != nil {
				return false, err
			}
			v.Status.Phase = p
			v.Status.PhaseTransitionTimestamps = append(v.Status.PhaseTransitionTimestamps,
				v1.VirtualMachineInstancePhaseTransitionTimestamp{Phase: p, PhaseTransitionTimestamp: metav1.Now()})
			ready := corev1.ConditionFalse
			if p == v1.Running {
				ready = corev1.ConditionTrue
			}
			v.Status.Conditions = []v1.VirtualMachineInstanceCondition{{Type: v1.VirtualMachineInstanceReady, Status: ready}}
			_, err = e.kv.KubevirtV1().VirtualMachineInstances(e.ns).UpdateStatus(context.Background(), v, metav1.UpdateOptions{})
			return err == nil, err
		})
	}
}

// run brings a fresh VMI to Running.
func (e *env) run(t *testing.T, name string) {
	e.setPhase(t, name, v1.Scheduled, v1.Running)
}

// release plays the agent finishing a deletion of the VMI with uid: it
// checks that the VMI is being deleted, removes its finalizer and waits
// until it is gone.
func (e *env) release(t *testing.T, name string, uid types.UID) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, "vmi "+name+" released", func() (bool, error) {
		v, err := e.getVMI(name)
		if apierrors.IsNotFound(err) || (err == nil && v.UID != uid) {
			return true, nil
		}
		if err != nil || v.DeletionTimestamp == nil {
			return false, err
		}
		v.Finalizers = nil
		_, err = e.kv.KubevirtV1().VirtualMachineInstances(e.ns).Update(context.Background(), v, metav1.UpdateOptions{})
		return false, err // polled again: gone next time, or a conflict retried
	})
}

// waitVM waits until the VM's status satisfies cond and returns it.
func (e *env) waitVM(t *testing.T, name, what string, cond func(*v1.VirtualMachine) bool) *v1.VirtualMachine {
	t.Helper()
	var vm *v1.VirtualMachine
	testenv.Eventually(t, 30*time.Second, "vm "+name+" "+what, func() error {
		v, err := e.getVM(name)
		if err != nil {
			return err
		}
		vm = v
		if !cond(v) {
			return fmt.Errorf("status %s, requests %v, created %v", v.Status.PrintableStatus, v.Status.StateChangeRequests, v.Status.Created)
		}
		return nil
	})
	return vm
}

func condition(vm *v1.VirtualMachine, t v1.VirtualMachineConditionType) *v1.VirtualMachineCondition {
	for i := range vm.Status.Conditions {
		if vm.Status.Conditions[i].Type == t {
			return &vm.Status.Conditions[i]
		}
	}
	return nil
}

func settled(printable v1.VirtualMachinePrintableStatus) func(*v1.VirtualMachine) bool {
	return func(vm *v1.VirtualMachine) bool {
		return len(vm.Status.StateChangeRequests) == 0 && vm.Status.PrintableStatus == printable
	}
}

// stays checks for d that the VMI named name keeps UID uid ("" = absent).
func (e *env) stays(t *testing.T, name string, uid types.UID, d time.Duration) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		v, err := e.getVMI(name)
		switch {
		case uid == "" && !apierrors.IsNotFound(err):
			t.Fatalf("vmi %s exists (err %v)", name, err)
		case uid != "" && (err != nil || v.UID != uid || v.DeletionTimestamp != nil):
			t.Fatalf("vmi %s (uid %s) changed: err %v", name, uid, err)
		}
	}
}

func stop(uid types.UID) v1.VirtualMachineStateChangeRequest {
	return v1.VirtualMachineStateChangeRequest{Action: v1.StopRequest, UID: &uid}
}

var start = v1.VirtualMachineStateChangeRequest{Action: v1.StartRequest}

// TestIntegration_StateChangeRequests drives `virtctl start/stop/restart`
// as nodevirt-api records them, against a real kube-apiserver.
func TestIntegration_StateChangeRequests(t *testing.T) {
	e := startEnv(t)
	t.Run("ManualStartStop", func(t *testing.T) {
		e.createVM(t, newVM("manual", v1.RunStrategyManual))
		e.waitVM(t, "manual", "Stopped", settled(v1.VirtualMachineStatusStopped))
		e.stays(t, "manual", "", time.Second)

		e.appendRequests(t, "manual", start)
		vmi := e.waitVMI(t, "manual", "")
		e.waitVM(t, "manual", "Starting, request removed", settled(v1.VirtualMachineStatusStarting))
		e.run(t, "manual")
		e.waitVM(t, "manual", "Running and Ready", func(vm *v1.VirtualMachine) bool {
			ready := condition(vm, v1.VirtualMachineReady)
			return settled(v1.VirtualMachineStatusRunning)(vm) && vm.Status.Ready && vm.Status.RunStrategy == v1.RunStrategyManual &&
				ready != nil && ready.Status == corev1.ConditionTrue
		})

		e.appendRequests(t, "manual", stop(vmi.UID))
		e.waitVM(t, "manual", "Stopping, request kept", func(vm *v1.VirtualMachine) bool {
			return vm.Status.PrintableStatus == v1.VirtualMachineStatusStopping && len(vm.Status.StateChangeRequests) == 1
		})
		e.release(t, "manual", vmi.UID)
		stopped := e.waitVM(t, "manual", "Stopped, request removed", settled(v1.VirtualMachineStatusStopped))
		if ready := condition(stopped, v1.VirtualMachineReady); stopped.Status.Created || stopped.Status.Ready ||
			ready == nil || ready.Status != corev1.ConditionFalse || ready.Reason != vm.ReasonVMINotExists {
			t.Errorf("stopped VM: created %v, ready %v, Ready condition %+v", stopped.Status.Created, stopped.Status.Ready, ready)
		}
		e.stays(t, "manual", "", time.Second)

		// A finished VMI is replaced on start (virt-api sends Stop{uid}+Start).
		e.appendRequests(t, "manual", start)
		vmi = e.waitVMI(t, "manual", "")
		e.run(t, "manual")
		e.setPhase(t, "manual", v1.Succeeded)
		e.waitVM(t, "manual", "Stopped", settled(v1.VirtualMachineStatusStopped))
		e.stays(t, "manual", vmi.UID, time.Second) // Manual keeps a finished VMI
		e.appendRequests(t, "manual", stop(vmi.UID), start)
		e.release(t, "manual", vmi.UID)
		next := e.waitVMI(t, "manual", vmi.UID)
		e.waitVM(t, "manual", "Starting", settled(v1.VirtualMachineStatusStarting))
		t.Logf("finished VMI %s replaced by %s", vmi.UID, next.UID)
	})

	t.Run("AlwaysRestart", func(t *testing.T) {
		e.createVM(t, newVM("always", v1.RunStrategyAlways))
		vmi := e.waitVMI(t, "always", "")
		e.run(t, "always")
		e.waitVM(t, "always", "Running", settled(v1.VirtualMachineStatusRunning))

		e.appendRequests(t, "always", stop(vmi.UID), start)
		e.release(t, "always", vmi.UID)
		next := e.waitVMI(t, "always", vmi.UID)
		if next.UID == vmi.UID {
			t.Fatalf("restart kept VMI uid %s", vmi.UID)
		}
		e.waitVM(t, "always", "Starting, requests removed", settled(v1.VirtualMachineStatusStarting))
		e.run(t, "always")

		// A stop naming the VMI that is gone is dropped; the new VMI stays.
		e.appendRequests(t, "always", stop(vmi.UID))
		e.waitVM(t, "always", "stale stop dropped", settled(v1.VirtualMachineStatusRunning))
		e.stays(t, "always", next.UID, 2*time.Second)
	})

	t.Run("RerunOnFailureStopStart", func(t *testing.T) {
		e.createVM(t, newVM("rerun", v1.RunStrategyRerunOnFailure))
		vmi := e.waitVMI(t, "rerun", "")
		e.run(t, "rerun")
		e.appendRequests(t, "rerun", stop(vmi.UID))
		e.release(t, "rerun", vmi.UID)
		e.waitVM(t, "rerun", "Stopped", settled(v1.VirtualMachineStatusStopped))
		e.stays(t, "rerun", "", 2*time.Second) // a stopped RerunOnFailure VM stays stopped
		e.appendRequests(t, "rerun", start)
		next := e.waitVMI(t, "rerun", "")
		e.run(t, "rerun")
		// A guest shutdown: KubeVirt deletes the VMI and the VM stays stopped.
		e.setPhase(t, "rerun", v1.Succeeded)
		e.release(t, "rerun", next.UID)
		e.waitVM(t, "rerun", "Stopped", settled(v1.VirtualMachineStatusStopped))
		e.stays(t, "rerun", "", 2*time.Second)
	})

	t.Run("StartPausedOnHalted", func(t *testing.T) {
		e.createVM(t, newVM("halted", v1.RunStrategyHalted))
		e.waitVM(t, "halted", "Stopped", settled(v1.VirtualMachineStatusStopped))
		e.appendRequests(t, "halted", v1.VirtualMachineStateChangeRequest{Action: v1.StartRequest,
			Data: map[string]string{v1.StartRequestDataPausedKey: v1.StartRequestDataPausedTrue}})
		vmi := e.waitVMI(t, "halted", "")
		if s := vmi.Spec.StartStrategy; s == nil || *s != v1.StartStrategyPaused {
			t.Errorf("vmi startStrategy = %v, want Paused", s)
		}
		vm := e.waitVM(t, "halted", "request removed", settled(v1.VirtualMachineStatusStarting))
		if s := vm.Spec.RunStrategy; s == nil || *s != v1.RunStrategyAlways {
			t.Errorf("spec.runStrategy = %v, want Always", s)
		}
	})

	t.Run("AppendRacingRemovalIsNotLost", func(t *testing.T) { testRace(t, e) })
}

// testRace runs Sync by hand, in a namespace the running controller does
// not watch, on a cached VM that predates an append: the status patch that
// drops the done Start carries the stale resourceVersion and is refused, so
// the Stop appended meanwhile survives, and the next sync on the fresh VM
// processes it.
func testRace(t *testing.T, e *env) {
	ctx := context.Background()
	ns := e.ns + "-race"
	if _, err := e.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h := &env{kv: e.kv, kube: e.kube, ns: ns}
	obj := newVM("race", v1.RunStrategyManual)
	obj.Finalizers = []string{v1.VirtualMachineControllerFinalizer}
	h.createVM(t, obj)
	vms := cache.NewIndexer(cache.MetaNamespaceKeyFunc, nil)
	vmis := cache.NewIndexer(cache.MetaNamespaceKeyFunc, nil)
	c := vm.New(vm.Deps{VMs: listers.NewVirtualMachineLister(vms), VMIs: listers.NewVirtualMachineInstanceLister(vmis),
		Client: e.kv.KubevirtV1(), Recorder: record.NewFakeRecorder(100)})
	// sync runs Sync on the given cached VM and the VMI as it is now.
	sync := func(cached *v1.VirtualMachine) error {
		t.Helper()
		_ = vms.Replace([]any{cached}, "")
		_ = vmis.Replace(nil, "")
		if v, err := h.getVMI("race"); err == nil {
			_ = vmis.Add(v)
		}
		return c.Sync(ctx, ns+"/race")
	}
	fresh := func() *v1.VirtualMachine {
		t.Helper()
		v, err := h.getVM("race")
		if err != nil {
			t.Fatal(err)
		}
		return v
	}

	h.appendRequests(t, "race", start)
	if err := sync(fresh()); err != nil {
		t.Fatal(err)
	}
	vmi := h.waitVMI(t, "race", "")
	h.run(t, "race")
	if err := sync(fresh()); err != nil {
		t.Fatal(err)
	}

	// A second Start (done: the VMI runs) is in the cached copy; a Stop is
	// appended after the cache was filled.
	h.appendRequests(t, "race", start)
	stale := fresh()
	h.appendRequests(t, "race", stop(vmi.UID))
	if err := sync(stale); !apierrors.IsConflict(err) {
		t.Fatalf("sync on a stale VM: %v, want a conflict", err)
	}
	if got := fresh().Status.StateChangeRequests; len(got) != 2 || got[1].Action != v1.StopRequest {
		t.Fatalf("requests after the refused write: %v, want [Start Stop]", got)
	}
	// The retry on the fresh VM drops the Start and acts on the Stop.
	if err := sync(fresh()); err != nil {
		t.Fatal(err)
	}
	if err := sync(fresh()); err != nil { // sees the VMI being deleted
		t.Fatal(err)
	}
	vmNow := fresh()
	if got := vmNow.Status.StateChangeRequests; len(got) != 1 || got[0].Action != v1.StopRequest {
		t.Fatalf("requests after the retry: %v, want [Stop]", got)
	}
	if vmNow.Status.PrintableStatus != v1.VirtualMachineStatusStopping {
		t.Errorf("printableStatus = %s, want Stopping", vmNow.Status.PrintableStatus)
	}
	h.release(t, "race", vmi.UID)
	if err := sync(fresh()); err != nil {
		t.Fatal(err)
	}
	if st := fresh().Status; len(st.StateChangeRequests) != 0 || st.PrintableStatus != v1.VirtualMachineStatusStopped {
		t.Errorf("status after the stop: %s, requests %v", st.PrintableStatus, st.StateChangeRequests)
	}
}
