package subresources

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

func testVM(rs v1.VirtualMachineRunStrategy, pending ...v1.VirtualMachineStateChangeRequest) *v1.VirtualMachine {
	vm := &v1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "vm1", Namespace: "ns", UID: "vm-uid"}}
	if rs != "" {
		vm.Spec.RunStrategy = ptr.To(rs)
	}
	vm.Status.PrintableStatus = v1.VirtualMachineStatusStopped
	vm.Status.StateChangeRequests = pending
	return vm
}

func testVMI(phase v1.VirtualMachineInstancePhase) *v1.VirtualMachineInstance {
	vmi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: "vm1", Namespace: "ns", UID: "vmi-uid"}}
	vmi.Status.Phase = phase
	vmi.Status.NodeName = "node1"
	return vmi
}

// opsJSON renders a plan's patches as "<target> <json>" lines.
func opsJSON(t *testing.T, p plan) []string {
	t.Helper()
	var out []string
	for _, pt := range p.Patches {
		b, err := json.Marshal(pt.Ops)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, pt.Target.String()+" "+string(b))
	}
	return out
}

// wantErr checks err is an API error with code and message.
func wantErr(t *testing.T, err error, code int, msg string) {
	t.Helper()
	if err == nil {
		t.Fatalf("err = nil, want %d %q", code, msg)
	}
	st, ok := err.(apierrors.APIStatus)
	if !ok {
		t.Fatalf("err %v is not an API status", err)
	}
	if got := st.Status(); int(got.Code) != code || got.Message != msg {
		t.Fatalf("err = %d %q, want %d %q", got.Code, got.Message, code, msg)
	}
}

const (
	startReq       = `{"action":"Start"}`
	stopReq        = `{"action":"Stop","uid":"vmi-uid"}`
	testEmpty      = `{"op":"test","path":"/status/stateChangeRequests","value":null}`
	addReqs        = `{"op":"add","path":"/status/stateChangeRequests","value":[`
	conflictPrefix = `Operation cannot be fulfilled on virtualmachine.kubevirt.io "vm1": `
)

func TestPlanStart(t *testing.T) {
	for _, tt := range []struct {
		name    string
		vm      *v1.VirtualMachine
		vmi     *v1.VirtualMachineInstance
		opts    StartOptions
		want    []string
		code    int
		wantMsg string
	}{
		{name: "HaltedNoVMI", vm: testVM(v1.RunStrategyHalted),
			want: []string{`VM [{"op":"test","path":"/spec/runStrategy","value":"Halted"},{"op":"replace","path":"/spec/runStrategy","value":"Always"}]`}},
		{name: "LegacyRunningFalse", vm: func() *v1.VirtualMachine { vm := testVM(""); vm.Spec.Running = ptr.To(false); return vm }(),
			want: []string{`VM [{"op":"test","path":"/spec/running","value":false},{"op":"replace","path":"/spec/running","value":true}]`}},
		{name: "NeitherFieldSet", vm: testVM(""),
			want: []string{`VM [{"op":"test","path":"/spec/running","value":null},{"op":"test","path":"/spec/runStrategy","value":null},{"op":"add","path":"/spec/runStrategy","value":"Always"}]`}},
		{name: "HaltedPaused", vm: testVM(v1.RunStrategyHalted), opts: StartOptions{Paused: true},
			want: []string{`VM status [` + testEmpty + `,` + addReqs + `{"action":"Start","data":{"paused":"true"}}]}]`}},
		{name: "HaltedFinalVMI", vm: testVM(v1.RunStrategyHalted), vmi: testVMI(v1.Succeeded),
			want: []string{`VM [{"op":"test","path":"/spec/runStrategy","value":"Halted"},{"op":"replace","path":"/spec/runStrategy","value":"Always"}]`}},
		{name: "ManualNoVMI", vm: testVM(v1.RunStrategyManual),
			want: []string{`VM status [` + testEmpty + `,` + addReqs + startReq + `]}]`}},
		{name: "ManualFinalVMIRestarts", vm: testVM(v1.RunStrategyManual), vmi: testVMI(v1.Failed),
			want: []string{`VM status [` + testEmpty + `,` + addReqs + stopReq + `,` + startReq + `]}]`}},
		{name: "ManualEmptyStatusAddsWhole", vm: func() *v1.VirtualMachine {
			vm := testVM(v1.RunStrategyManual)
			vm.Status = v1.VirtualMachineStatus{}
			return vm
		}(),
			want: []string{`VM status [{"op":"add","path":"/status","value":{"stateChangeRequests":[` + startReq + `]}}]`}},
		{name: "ManualClearsStartFailure", vm: func() *v1.VirtualMachine {
			vm := testVM(v1.RunStrategyManual)
			vm.Status.StartFailure = &v1.VirtualMachineStartFailure{ConsecutiveFailCount: 2}
			return vm
		}(),
			want: []string{`VM status [` + testEmpty + `,` + addReqs + startReq + `]},{"op":"remove","path":"/status/startFailure","value":null}]`}},
		{name: "RerunOnFailureSucceededRestarts", vm: testVM(v1.RunStrategyRerunOnFailure), vmi: testVMI(v1.Succeeded),
			want: []string{`VM status [` + testEmpty + `,` + addReqs + stopReq + `,` + startReq + `]}]`}},
		{name: "RerunOnFailureFailed", vm: testVM(v1.RunStrategyRerunOnFailure), vmi: testVMI(v1.Failed),
			code: 409, wantMsg: conflictPrefix + "RerunOnFailure does not support starting VM from failed state"},
		{name: "AlwaysRunning", vm: testVM(v1.RunStrategyAlways), vmi: testVMI(v1.Running),
			code: 409, wantMsg: conflictPrefix + "VM is already running"},
		{name: "ManualScheduling", vm: testVM(v1.RunStrategyManual), vmi: testVMI(v1.Scheduling),
			code: 409, wantMsg: conflictPrefix + "VM is already running"},
		{name: "AlwaysNoVMI", vm: testVM(v1.RunStrategyAlways),
			code: 409, wantMsg: conflictPrefix + "Always does not support manual start requests"},
		{name: "OnceNoVMI", vm: testVM(v1.RunStrategyOnce),
			code: 409, wantMsg: conflictPrefix + "Once does not support manual start requests"},
		{name: "ManualPendingStart", vm: testVM(v1.RunStrategyManual, v1.VirtualMachineStateChangeRequest{Action: v1.StartRequest}),
			code: 500, wantMsg: "Internal error occurred: unable to complete request: stop/start already underway"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, err := planStart(tt.vm, tt.vmi, tt.opts)
			if tt.code != 0 {
				wantErr(t, err, tt.code, tt.wantMsg)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, opsJSON(t, p)); diff != "" {
				t.Errorf("patches (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPlanStop(t *testing.T) {
	withGrace := func(g int64) *v1.VirtualMachineInstance {
		vmi := testVMI(v1.Running)
		vmi.Spec.TerminationGracePeriodSeconds = ptr.To(g)
		return vmi
	}
	for _, tt := range []struct {
		name    string
		vm      *v1.VirtualMachine
		vmi     *v1.VirtualMachineInstance
		opts    StopOptions
		want    []string
		code    int
		wantMsg string
	}{
		{name: "AlwaysRunning", vm: testVM(v1.RunStrategyAlways), vmi: testVMI(v1.Running),
			want: []string{`VM [{"op":"test","path":"/spec/runStrategy","value":"Always"},{"op":"replace","path":"/spec/runStrategy","value":"Halted"}]`}},
		{name: "AlwaysNoVMIStillHalts", vm: testVM(v1.RunStrategyAlways),
			want: []string{`VM [{"op":"test","path":"/spec/runStrategy","value":"Always"},{"op":"replace","path":"/spec/runStrategy","value":"Halted"}]`}},
		{name: "AlwaysGracePeriodFirst", vm: testVM(v1.RunStrategyAlways), vmi: testVMI(v1.Running), opts: StopOptions{GracePeriod: ptr.To[int64](0)},
			want: []string{
				`VMI [{"op":"test","path":"/spec/terminationGracePeriodSeconds","value":null},{"op":"add","path":"/spec/terminationGracePeriodSeconds","value":0}]`,
				`VM [{"op":"test","path":"/spec/runStrategy","value":"Always"},{"op":"replace","path":"/spec/runStrategy","value":"Halted"}]`,
			}},
		{name: "ManualRunning", vm: testVM(v1.RunStrategyManual), vmi: testVMI(v1.Running),
			want: []string{`VM status [` + testEmpty + `,` + addReqs + stopReq + `]}]`}},
		{name: "ManualStopReplacesPending", vm: testVM(v1.RunStrategyManual, v1.VirtualMachineStateChangeRequest{Action: v1.StartRequest}), vmi: testVMI(v1.Running),
			want: []string{`VM status [{"op":"test","path":"/status/stateChangeRequests","value":[` + startReq + `]},{"op":"replace","path":"/status/stateChangeRequests","value":[` + stopReq + `]}]`}},
		{name: "ManualNoVMI", vm: testVM(v1.RunStrategyManual),
			code: 409, wantMsg: conflictPrefix + "VM is not running"},
		{name: "RerunOnFailureFinal", vm: testVM(v1.RunStrategyRerunOnFailure), vmi: testVMI(v1.Succeeded),
			code: 409, wantMsg: conflictPrefix + "VM is not running"},
		{name: "HaltedNoVMI", vm: testVM(v1.RunStrategyHalted),
			code: 409, wantMsg: conflictPrefix + "VM is not running"},
		{name: "HaltedNoGrace", vm: testVM(v1.RunStrategyHalted), vmi: withGrace(30),
			code: 409, wantMsg: conflictPrefix + "Halted only supports manual stop requests with a shorter graceperiod"},
		{name: "HaltedLongerGrace", vm: testVM(v1.RunStrategyHalted), vmi: withGrace(30), opts: StopOptions{GracePeriod: ptr.To[int64](30)},
			code: 409, wantMsg: conflictPrefix + "Halted only supports manual stop requests with a shorter graceperiod"},
		{name: "HaltedShorterGrace", vm: testVM(v1.RunStrategyHalted), vmi: withGrace(30), opts: StopOptions{GracePeriod: ptr.To[int64](1)},
			want: []string{
				`VMI [{"op":"test","path":"/spec/terminationGracePeriodSeconds","value":30},{"op":"replace","path":"/spec/terminationGracePeriodSeconds","value":1}]`,
				`VM status [` + testEmpty + `,` + addReqs + stopReq + `]}]`,
			}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, err := planStop(tt.vm, tt.vmi, tt.opts)
			if tt.code != 0 {
				wantErr(t, err, tt.code, tt.wantMsg)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, opsJSON(t, p)); diff != "" {
				t.Errorf("patches (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPlanRestart(t *testing.T) {
	for _, tt := range []struct {
		name    string
		vm      *v1.VirtualMachine
		vmi     *v1.VirtualMachineInstance
		opts    RestartOptions
		want    []string
		force   bool
		code    int
		wantMsg string
	}{
		{name: "AlwaysRunning", vm: testVM(v1.RunStrategyAlways), vmi: testVMI(v1.Running),
			want: []string{`VM status [` + testEmpty + `,` + addReqs + stopReq + `,` + startReq + `]}]`}},
		{name: "ManualForced", vm: testVM(v1.RunStrategyManual), vmi: testVMI(v1.Running), opts: RestartOptions{GracePeriodSeconds: ptr.To[int64](0)},
			want: []string{`VM status [` + testEmpty + `,` + addReqs + stopReq + `,` + startReq + `]}]`}, force: true},
		{name: "Halted", vm: testVM(v1.RunStrategyHalted), vmi: testVMI(v1.Running),
			code: 409, wantMsg: conflictPrefix + "RunStategy Halted does not support manual restart requests"},
		{name: "Once", vm: testVM(v1.RunStrategyOnce), vmi: testVMI(v1.Running),
			code: 409, wantMsg: conflictPrefix + "RunStategy Once does not support manual restart requests"},
		{name: "AlwaysNoVMI", vm: testVM(v1.RunStrategyAlways),
			code: 409, wantMsg: conflictPrefix + "VM is not running: Halted"},
		{name: "PositiveGrace", vm: testVM(v1.RunStrategyAlways), vmi: testVMI(v1.Running), opts: RestartOptions{GracePeriodSeconds: ptr.To[int64](5)},
			code: 400, wantMsg: "For force restart, only gracePeriod=0 is supported for now"},
		{name: "NegativeGrace", vm: testVM(v1.RunStrategyAlways), vmi: testVMI(v1.Running), opts: RestartOptions{GracePeriodSeconds: ptr.To[int64](-1)},
			code: 400, wantMsg: "gracePeriod has to be greater or equal to 0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, err := planRestart(tt.vm, tt.vmi, tt.opts)
			if tt.code != 0 {
				wantErr(t, err, tt.code, tt.wantMsg)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, opsJSON(t, p)); diff != "" {
				t.Errorf("patches (-want +got):\n%s", diff)
			}
			if p.DeleteLauncher != tt.force {
				t.Errorf("DeleteLauncher = %v, want %v", p.DeleteLauncher, tt.force)
			}
		})
	}
}

func TestPlanMigrate(t *testing.T) {
	vm := testVM(v1.RunStrategyAlways)
	wantErr(t, planMigrate(vm, nil), http.StatusNotFound, `virtualmachineinstance.kubevirt.io "vm1" not found`)
	wantErr(t, planMigrate(vm, testVMI(v1.Scheduled)), http.StatusConflict, conflictPrefix+"VM is not running")
	if err := planMigrate(vm, testVMI(v1.Running)); err != nil {
		t.Fatal(err)
	}
}
