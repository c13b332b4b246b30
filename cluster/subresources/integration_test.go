package subresources

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/cluster/client/clientset/versioned"
	"github.com/nodevirt/nodevirt/hack/testenv/apiserver"
)

// apiFixture runs the handler against a real kube-apiserver with the
// nodevirt CRDs, and a fake agent for the proxied routes.
type apiFixture struct {
	h     *Handler
	kv    versioned.Interface
	agent *fakeAgent
}

func startAPIFixture(t *testing.T) *apiFixture {
	t.Helper()
	env := apiserver.Start(t)
	kube := kubernetes.NewForConfigOrDie(env.Config)
	kv := versioned.NewForConfigOrDie(env.Config)
	ctx := context.Background()
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	agent := startFakeAgent(t, time.Hour)
	h, err := New(Config{AgentPort: agent.port, Version: BuildVersion()}, Deps{
		KubeVirt: kv, Kube: kube, Agents: staticAgents{testNode: "127.0.0.1"},
		ClientTLS: agent.clientTLS,
	})
	if err != nil {
		t.Fatal(err)
	}
	return &apiFixture{h: h, kv: kv, agent: agent}
}

func (f *apiFixture) put(t *testing.T, path, body string) (int, string) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPut, base+path, strings.NewReader(body))
	rec := httptest.NewRecorder()
	f.h.ServeHTTP(rec, req)
	b, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(b)
}

func guestSpec() v1.VirtualMachineInstanceSpec {
	var s v1.VirtualMachineInstanceSpec
	if err := json.Unmarshal([]byte(`{"domain":{"memory":{"guest":"64Mi"},"devices":{}}}`), &s); err != nil {
		panic(err)
	}
	return s
}

func (f *apiFixture) createVM(t *testing.T, name string, rs v1.VirtualMachineRunStrategy) *v1.VirtualMachine {
	t.Helper()
	vm := &v1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}}
	vm.Spec.RunStrategy = ptr.To(rs)
	vm.Spec.Template = &v1.VirtualMachineInstanceTemplateSpec{Spec: guestSpec()}
	vm, err := f.kv.KubevirtV1().VirtualMachines("ns").Create(context.Background(), vm, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	vm.Status.PrintableStatus = v1.VirtualMachineStatusStopped
	vm, err = f.kv.KubevirtV1().VirtualMachines("ns").UpdateStatus(context.Background(), vm, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return vm
}

// createVMI creates the VM's VMI, owned by it, Running on testNode.
func (f *apiFixture) createVMI(t *testing.T, vm *v1.VirtualMachine) *v1.VirtualMachineInstance {
	t.Helper()
	vmi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{
		Name: vm.Name, Namespace: "ns",
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(vm, v1.SchemeGroupVersion.WithKind(v1.KindVM))},
	}, Spec: guestSpec()}
	vmi, err := f.kv.KubevirtV1().VirtualMachineInstances("ns").Create(context.Background(), vmi, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Through the phases the CRD's transition rule allows.
	for _, ph := range []v1.VirtualMachineInstancePhase{v1.Pending, v1.Scheduled, v1.Running} {
		vmi.Status.Phase, vmi.Status.NodeName = ph, testNode
		vmi, err = f.kv.KubevirtV1().VirtualMachineInstances("ns").UpdateStatus(context.Background(), vmi, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	return vmi
}

func (f *apiFixture) getVM(t *testing.T, name string) *v1.VirtualMachine {
	t.Helper()
	vm, err := f.kv.KubevirtV1().VirtualMachines("ns").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return vm
}

func wantCode(t *testing.T, what string, code int, body string, want int) {
	t.Helper()
	if code != want {
		t.Fatalf("%s: %d %s, want %d", what, code, body, want)
	}
}

func managedBy(obj metav1.Object, manager string) bool {
	for _, m := range obj.GetManagedFields() {
		if m.Manager == manager {
			return true
		}
	}
	return false
}

func TestIntegration_Lifecycle(t *testing.T) {
	f := startAPIFixture(t)
	ctx := context.Background()

	t.Run("StartHalted", func(t *testing.T) {
		f.createVM(t, "halted", v1.RunStrategyHalted)
		code, body := f.put(t, "virtualmachines/halted/start", `{"dryRun":["All"]}`)
		wantCode(t, "dry-run start", code, body, http.StatusAccepted)
		if rs := *f.getVM(t, "halted").Spec.RunStrategy; rs != v1.RunStrategyHalted {
			t.Fatalf("dry run changed runStrategy to %s", rs)
		}
		code, body = f.put(t, "virtualmachines/halted/start", "")
		wantCode(t, "start", code, body, http.StatusAccepted)
		vm := f.getVM(t, "halted")
		if *vm.Spec.RunStrategy != v1.RunStrategyAlways || !managedBy(vm, v1.ManagerAPI) {
			t.Errorf("runStrategy %s, managers %v; want Always by %s", *vm.Spec.RunStrategy, vm.ManagedFields, v1.ManagerAPI)
		}
		code, body = f.put(t, "virtualmachines/halted/start", "")
		wantCode(t, "start of an Always VM", code, body, http.StatusConflict)
	})

	t.Run("StartManualTwice", func(t *testing.T) {
		f.createVM(t, "manual", v1.RunStrategyManual)
		code, body := f.put(t, "virtualmachines/manual/start", `{"paused":true}`)
		wantCode(t, "start", code, body, http.StatusAccepted)
		want := []v1.VirtualMachineStateChangeRequest{{Action: v1.StartRequest, Data: map[string]string{"paused": "true"}}}
		if diff := cmp.Diff(want, f.getVM(t, "manual").Status.StateChangeRequests); diff != "" {
			t.Errorf("stateChangeRequests (-want +got):\n%s", diff)
		}
		code, body = f.put(t, "virtualmachines/manual/start", "")
		wantCode(t, "second start", code, body, http.StatusInternalServerError)
		if !strings.Contains(body, "stop/start already underway") {
			t.Errorf("second start: %s", body)
		}
	})

	t.Run("StopManualWithGracePeriod", func(t *testing.T) {
		vm := f.createVM(t, "stopme", v1.RunStrategyManual)
		vmi := f.createVMI(t, vm)
		code, body := f.put(t, "virtualmachines/stopme/stop", `{"gracePeriod":5}`)
		wantCode(t, "stop", code, body, http.StatusAccepted)
		got, err := f.kv.KubevirtV1().VirtualMachineInstances("ns").Get(ctx, "stopme", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if g := got.Spec.TerminationGracePeriodSeconds; g == nil || *g != 5 {
			t.Errorf("VMI terminationGracePeriodSeconds = %v, want 5", g)
		}
		want := []v1.VirtualMachineStateChangeRequest{{Action: v1.StopRequest, UID: ptr.To(vmi.UID)}}
		if diff := cmp.Diff(want, f.getVM(t, "stopme").Status.StateChangeRequests); diff != "" {
			t.Errorf("stateChangeRequests (-want +got):\n%s", diff)
		}
	})

	t.Run("StopAlways", func(t *testing.T) {
		vm := f.createVM(t, "always", v1.RunStrategyAlways)
		f.createVMI(t, vm)
		code, body := f.put(t, "virtualmachines/always/stop", "")
		wantCode(t, "stop", code, body, http.StatusAccepted)
		if rs := *f.getVM(t, "always").Spec.RunStrategy; rs != v1.RunStrategyHalted {
			t.Errorf("runStrategy %s, want Halted", rs)
		}
	})

	t.Run("Restart", func(t *testing.T) {
		vm := f.createVM(t, "restartme", v1.RunStrategyAlways)
		vmi := f.createVMI(t, vm)
		code, body := f.put(t, "virtualmachines/restartme/restart", "{}")
		wantCode(t, "restart", code, body, http.StatusAccepted)
		want := []v1.VirtualMachineStateChangeRequest{{Action: v1.StopRequest, UID: ptr.To(vmi.UID)}, {Action: v1.StartRequest}}
		vm = f.getVM(t, "restartme")
		if diff := cmp.Diff(want, vm.Status.StateChangeRequests); diff != "" {
			t.Errorf("stateChangeRequests (-want +got):\n%s", diff)
		}
		if !managedBy(vm, v1.ManagerAPI) {
			t.Errorf("status not written by %s: %v", v1.ManagerAPI, vm.ManagedFields)
		}
	})

	t.Run("StalePlanConflicts", func(t *testing.T) {
		vm := f.createVM(t, "stale", v1.RunStrategyManual)
		p, err := planStart(vm, nil, StartOptions{})
		if err != nil {
			t.Fatal(err)
		}
		code, body := f.put(t, "virtualmachines/stale/start", "")
		wantCode(t, "start", code, body, http.StatusAccepted)
		err = f.h.apply(ctx, "ns", "stale", nil, p, nil)
		if !apierrors.IsConflict(err) {
			t.Errorf("applying a stale plan: %v, want a conflict", err)
		}
	})

	t.Run("Migrate", func(t *testing.T) {
		vm := f.createVM(t, "migrateme", v1.RunStrategyAlways)
		code, body := f.put(t, "virtualmachines/migrateme/migrate", "{}")
		wantCode(t, "migrate without VMI", code, body, http.StatusNotFound)
		f.createVMI(t, vm)
		code, body = f.put(t, "virtualmachines/migrateme/migrate", `{"addedNodeSelector":{"zone":"b"}}`)
		wantCode(t, "migrate", code, body, http.StatusAccepted)
		l, err := f.kv.KubevirtV1().VirtualMachineInstanceMigrations("ns").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Items) != 1 || l.Items[0].Spec.VMIName != "migrateme" || !strings.HasPrefix(l.Items[0].Name, "kubevirt-migrate-vm-") ||
			l.Items[0].Spec.AddedNodeSelector["zone"] != "b" {
			t.Errorf("migrations: %+v", l.Items)
		}
	})

	t.Run("PauseProxied", func(t *testing.T) {
		vm := f.createVM(t, "pauseme", v1.RunStrategyAlways)
		f.createVMI(t, vm)
		code, body := f.put(t, "virtualmachineinstances/pauseme/pause", "{}")
		wantCode(t, "pause", code, body, http.StatusOK)
		if c := f.agent.lastCall(t); c.Path != "/v1/namespaces/ns/virtualmachineinstances/pauseme/pause" {
			t.Errorf("agent got %s", c.Path)
		}
		code, body = f.put(t, "virtualmachineinstances/nope/pause", "{}")
		wantCode(t, "pause of an unknown VMI", code, body, http.StatusNotFound)
	})

	t.Run("Healthz", func(t *testing.T) {
		req := httptest.NewRequest(http.MethodGet, "/apis/subresources.kubevirt.io/v1/healthz", nil)
		rec := httptest.NewRecorder()
		f.h.ServeHTTP(rec, req)
		if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"connectivity":"ok"`) {
			t.Errorf("healthz: %d %s", rec.Code, rec.Body)
		}
	})

	t.Run("ExpandSpec", func(t *testing.T) {
		f.createVM(t, "expandme", v1.RunStrategyHalted)
		req := httptest.NewRequest(http.MethodGet, base+"virtualmachines/expandme/expand-spec", nil)
		rec := httptest.NewRecorder()
		f.h.ServeHTTP(rec, req)
		var vm v1.VirtualMachine
		if err := json.Unmarshal(rec.Body.Bytes(), &vm); err != nil || rec.Code != 200 || vm.Name != "expandme" || vm.Kind != v1.KindVM {
			t.Errorf("expand-spec: %d %s", rec.Code, rec.Body)
		}
	})
}
