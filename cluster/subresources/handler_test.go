package subresources

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

const base = "/apis/subresources.kubevirt.io/v1/namespaces/ns/"

func (f *fixture) do(t *testing.T, method, path, body string) (*http.Response, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, path, rd)
	rec := httptest.NewRecorder()
	f.h.ServeHTTP(rec, req)
	resp := rec.Result()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func status(t *testing.T, body string) metav1.Status {
	t.Helper()
	var s metav1.Status
	if err := json.Unmarshal([]byte(body), &s); err != nil || s.Kind != "Status" {
		t.Fatalf("body %q is not a Status: %v", body, err)
	}
	return s
}

// TestRoutes_VMIProxied checks every VMI route reaches the agent under
// its node API path, with the query and body.
func TestRoutes_VMIProxied(t *testing.T) {
	objs := []runtime.Object{
		runningVMI("run", v1.VirtualMachineInstanceAgentConnected),
		runningVMI("paused", v1.VirtualMachineInstancePaused),
	}
	for _, tt := range []struct {
		method, path, body string
		agentPath          string
	}{
		{"PUT", "virtualmachineinstances/run/pause", "", "pause"},
		{"PUT", "virtualmachineinstances/paused/unpause", "{}", "unpause"},
		{"PUT", "virtualmachineinstances/run/softreboot", "", "softreboot"},
		{"PUT", "virtualmachineinstances/run/reset", "", "reset"},
		{"PUT", "virtualmachineinstances/run/freeze", `{"unfreezeTimeout":"5m0s"}`, "freeze"},
		{"PUT", "virtualmachineinstances/run/unfreeze", "", "unfreeze"},
		{"GET", "virtualmachineinstances/run/guestosinfo", "", "guestosinfo"},
		{"GET", "virtualmachineinstances/run/userlist", "", "userlist"},
		{"GET", "virtualmachineinstances/run/filesystemlist", "", "filesystemlist"},
		{"GET", "virtualmachineinstances/run/vnc/screenshot?moveCursor=true", "", "vnc/screenshot"},
		{"GET", "virtualmachineinstances/run/portforward/80", "", "portforward/80"},
		{"GET", "virtualmachineinstances/run/portforward/53/udp", "", "portforward/53/udp"},
	} {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			f := newFixture(t, objs...)
			resp, body := f.do(t, tt.method, base+tt.path, tt.body)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("code %d: %s", resp.StatusCode, body)
			}
			name := strings.Split(tt.path, "/")[1]
			call := f.agent.lastCall(t)
			want := "/v1/namespaces/ns/virtualmachineinstances/" + name + "/" + tt.agentPath
			if call.Method != tt.method || call.Path != want {
				t.Errorf("agent got %s %s, want %s %s", call.Method, call.Path, tt.method, want)
			}
			if call.Body != tt.body {
				t.Errorf("agent got body %q, want %q", call.Body, tt.body)
			}
			if q := strings.SplitN(tt.path, "?", 2); len(q) == 2 && call.Query != q[1] {
				t.Errorf("agent got query %q, want %q", call.Query, q[1])
			}
			if call.ClientCN != "nodevirt-api" {
				t.Errorf("agent saw client %q, want nodevirt-api", call.ClientCN)
			}
		})
	}
}

// TestRoutes_Refusals checks virt-api's refusals happen before the node.
func TestRoutes_Refusals(t *testing.T) {
	stopped := runningVMI("stopped")
	stopped.Status.Phase = v1.Succeeded
	noConsole := runningVMI("noconsole")
	noConsole.Spec.Domain.Devices.AutoattachSerialConsole = new(bool)
	objs := []runtime.Object{runningVMI("run"), runningVMI("paused", v1.VirtualMachineInstancePaused), stopped, noConsole}
	vmiConflict := `Operation cannot be fulfilled on virtualmachineinstance.kubevirt.io `
	for _, tt := range []struct {
		method, path string
		code         int
		msg          string
	}{
		{"PUT", "virtualmachineinstances/paused/pause", 409, vmiConflict + `"paused": VMI is already paused`},
		{"PUT", "virtualmachineinstances/stopped/pause", 409, vmiConflict + `"stopped": VM is not running`},
		{"PUT", "virtualmachineinstances/run/unpause", 409, vmiConflict + `"run": VMI is not paused`},
		{"PUT", "virtualmachineinstances/paused/softreboot", 409, vmiConflict + `"paused": VMI is paused`},
		{"PUT", "virtualmachineinstances/stopped/freeze", 409, vmiConflict + `"stopped": VM is not running`},
		{"PUT", "virtualmachineinstances/stopped/unfreeze", 409, vmiConflict + `"stopped": VMI is not running`},
		{"GET", "virtualmachineinstances/run/guestosinfo", 409, vmiConflict + `"run": VMI does not have guest agent connected`},
		{"GET", "virtualmachineinstances/stopped/userlist", 409, vmiConflict + `"stopped": VMI is not running`},
		{"GET", "virtualmachineinstances/stopped/console", 400, "VMI is not running"},
		{"GET", "virtualmachineinstances/noconsole/console", 400, "No serial consoles are present."},
		{"GET", "virtualmachineinstances/stopped/vnc", 400, "VMI is not running"},
		{"GET", "virtualmachineinstances/paused/portforward/22", 409, vmiConflict + `"paused": VMI is paused`},
		{"GET", "virtualmachineinstances/run/portforward/99999", 400, `port: "99999" is not a port number (1-65535)`},
		{"GET", "virtualmachineinstances/run/portforward/22/sctp", 400, `protocol: "sctp" is not tcp or udp`},
		{"PUT", "virtualmachineinstances/nope/pause", 404, `virtualmachineinstance.kubevirt.io "nope" not found`},
		{"GET", "virtualmachineinstances/nope/console", 404, `virtualmachineinstance.kubevirt.io "nope" not found`},
		{"PUT", "virtualmachines/nope/start", 404, `virtualmachine.kubevirt.io "nope" not found`},
		{"PUT", "virtualmachines/nope/migrate", 404, `virtualmachine.kubevirt.io "nope" not found`},
		{"GET", "virtualmachines/nope/expand-spec", 404, `virtualmachine.kubevirt.io "nope" not found`},
		{"GET", "virtualmachines/nope/portforward/22", 404, `virtualmachine.kubevirt.io "nope" not found`},
		{"PUT", "virtualmachineinstances/run/addvolume", 404, "the server could not find the requested resource"},
	} {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			f := newFixture(t, objs...)
			resp, body := f.do(t, tt.method, base+tt.path, "")
			if resp.StatusCode != tt.code {
				t.Fatalf("code %d, want %d: %s", resp.StatusCode, tt.code, body)
			}
			if s := status(t, body); s.Message != tt.msg || int(s.Code) != tt.code {
				t.Errorf("status %d %q, want %d %q", s.Code, s.Message, tt.code, tt.msg)
			}
			if n := f.agent.callCount(); n != 0 {
				t.Errorf("the agent got %d requests, want none", n)
			}
		})
	}
}

func TestRoutes_BadBody(t *testing.T) {
	vm := testVM(v1.RunStrategyManual)
	vm.Namespace = "ns"
	for _, tt := range []struct{ path, body, want string }{
		{"virtualmachines/vm1/stop", `{"gracePeriod":"soon"}`, "StopOptions.gracePeriod"},
		{"virtualmachines/vm1/start", `{"paused":1}`, "StartOptions.paused"},
		{"virtualmachines/vm1/restart", `{"gracePeriodSeconds":`, "unexpected EOF"},
		{"virtualmachines/vm1/migrate", `{"addedNodeSelector":[]}`, "MigrateOptions.addedNodeSelector"},
		{"virtualmachineinstances/vm1/pause", `{"dryRun":true}`, "PauseOptions.dryRun"},
		{"virtualmachineinstances/vm1/freeze", `{"unfreezeTimeout":"forever"}`, "forever"},
		{"expand-vm-spec", `{"metadata":{"namespace":"other"}}`, "VM namespace must be empty or ns"},
		{"expand-vm-spec", `not json`, "Can not unmarshal Request body to struct"},
	} {
		t.Run(tt.path+" "+tt.body, func(t *testing.T) {
			f := newFixture(t, vm, runningVMI("vm1"))
			resp, body := f.do(t, "PUT", base+tt.path, tt.body)
			if resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("code %d, want 400: %s", resp.StatusCode, body)
			}
			if s := status(t, body); !strings.Contains(s.Message, tt.want) {
				t.Errorf("message %q does not name %q", s.Message, tt.want)
			}
		})
	}
}

func TestRoutes_AgentErrorBecomesStatus(t *testing.T) {
	f := newFixture(t, runningVMI("run"))
	// "conflict" is not a route; go through the proxy directly.
	req := httptest.NewRequest("PUT", base+"virtualmachineinstances/run/reset", nil)
	rec := httptest.NewRecorder()
	f.h.proxy.serve(rec, req, runningVMI("run"), "conflict", "")
	s := status(t, rec.Body.String())
	if rec.Code != http.StatusConflict || s.Code != 409 || s.Message != "agent says no" || s.Reason != metav1.StatusReasonConflict {
		t.Errorf("got %d %+v, want 409 Conflict %q", rec.Code, s, "agent says no")
	}
}

func TestRoutes_NoAgent(t *testing.T) {
	vmi := runningVMI("run")
	vmi.Status.NodeName = "node-without-agent"
	f := newFixture(t, vmi)
	resp, body := f.do(t, "PUT", base+"virtualmachineinstances/run/pause", "")
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(status(t, body).Message, "node-without-agent") {
		t.Errorf("got %d %s, want 503 naming the node", resp.StatusCode, body)
	}
}

func TestRoutes_DryRunPause(t *testing.T) {
	f := newFixture(t, runningVMI("run"))
	resp, body := f.do(t, "PUT", base+"virtualmachineinstances/run/pause", `{"dryRun":["All"]}`)
	if resp.StatusCode != http.StatusOK || f.agent.callCount() != 0 {
		t.Errorf("dry run: code %d (%s), agent calls %d; want 200 and none", resp.StatusCode, body, f.agent.callCount())
	}
}

func TestRoutes_Discovery(t *testing.T) {
	f := newFixture(t)
	for _, v := range Versions {
		resp, body := f.do(t, "GET", "/apis/subresources.kubevirt.io/"+v+"/", "")
		var l metav1.APIResourceList
		if err := json.Unmarshal([]byte(body), &l); err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", v, resp.StatusCode, body)
		}
		if l.GroupVersion != "subresources.kubevirt.io/"+v || len(l.APIResources) != len(discoveryResources) {
			t.Errorf("%s: got %s with %d resources", v, l.GroupVersion, len(l.APIResources))
		}
		resp, body = f.do(t, "GET", "/apis/subresources.kubevirt.io/"+v+"/version", "")
		if resp.StatusCode != 200 || !strings.Contains(body, `"gitVersion":"v-test"`) {
			t.Errorf("%s version: %d %s", v, resp.StatusCode, body)
		}
		resp, _ = f.do(t, "GET", "/apis/subresources.kubevirt.io/"+v+"/guestfs", "")
		if resp.StatusCode != 404 {
			t.Errorf("%s guestfs: %d, want 404", v, resp.StatusCode)
		}
	}
	if _, err := AggregatedVersions(); err != nil {
		t.Fatal(err)
	}
}
