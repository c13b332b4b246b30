package subresources

import (
	"net/http"
	"strings"
	"testing"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// TestFreeze_ForwardsUnfreezeTimeout checks the node agent gets the
// decoded timeout as JSON, whatever spelling virtctl or a user sent.
func TestFreeze_ForwardsUnfreezeTimeout(t *testing.T) {
	for _, tt := range []struct{ name, body, want string }{
		{"virtctl", `{"unfreezeTimeout":"5m0s"}`, `{"unfreezeTimeout":"5m0s"}`},
		{"short", `{"unfreezeTimeout":"2s"}`, `{"unfreezeTimeout":"2s"}`},
		{"YAML", "unfreezeTimeout: 90s\n", `{"unfreezeTimeout":"1m30s"}`},
		{"other fields dropped", `{"unfreezeTimeout":"1m","kind":"FreezeUnfreezeTimeout"}`, `{"unfreezeTimeout":"1m0s"}`},
		{"no body: the node's default", "", ""},
		{"no timeout: the node's default", "{}", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, runningVMI("run", v1.VirtualMachineInstanceAgentConnected))
			resp, body := f.do(t, "PUT", base+"virtualmachineinstances/run/freeze", tt.body)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("code %d: %s", resp.StatusCode, body)
			}
			if got := f.agent.lastCall(t).Body; got != tt.want {
				t.Errorf("agent got body %q, want %q", got, tt.want)
			}
		})
	}
}

func TestFreeze_RefusesNonPositiveTimeout(t *testing.T) {
	for _, body := range []string{`{"unfreezeTimeout":"0s"}`, `{"unfreezeTimeout":"-5m"}`} {
		t.Run(body, func(t *testing.T) {
			f := newFixture(t, runningVMI("run"))
			resp, b := f.do(t, "PUT", base+"virtualmachineinstances/run/freeze", body)
			if resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("code %d, want 400: %s", resp.StatusCode, b)
			}
			if s := status(t, b); !strings.Contains(s.Message, "unfreezeTimeout") {
				t.Errorf("message %q does not name unfreezeTimeout", s.Message)
			}
			if n := f.agent.callCount(); n != 0 {
				t.Errorf("the agent got %d requests, want none", n)
			}
		})
	}
}
