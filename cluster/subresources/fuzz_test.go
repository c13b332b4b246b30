package subresources

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// FuzzSubresources sends arbitrary requests to the subresources.kubevirt.io
// handler (a VM, a running VMI, an agent answering): no panic, never an
// internal error (500), and every refusal is a metav1.Status with a
// message, as virtctl expects.
func FuzzSubresources(f *testing.F) {
	for _, seed := range []struct{ method, path, body string }{
		{"PUT", "virtualmachines/vm1/start", `{"paused":true}`},
		{"PUT", "virtualmachines/vm1/stop", `{"gracePeriod":-1}`},
		{"PUT", "virtualmachines/vm1/restart", `{"gracePeriodSeconds":99999999999999999999}`},
		{"PUT", "virtualmachines/vm1/migrate", `{"addedNodeSelector":{"$(reboot)":"` + strings.Repeat("x", 70000) + `"}}`},
		{"PUT", "virtualmachines/../../etc/start", ``},
		{"PUT", "virtualmachineinstances/vm1/freeze", `{"unfreezeTimeout":"-5m"}`},
		{"PUT", "virtualmachineinstances/vm1/pause", `[1,2,3]`},
		{"PUT", "virtualmachineinstances/vm1/softreboot", "\x00\xff"},
		{"GET", "virtualmachineinstances/vm1/portforward/0", ``},
		{"GET", "virtualmachineinstances/vm1/portforward/65536/udp", ``},
		{"GET", "virtualmachineinstances/ünï☃/console", ``},
		{"GET", "virtualmachineinstances/vm1/vnc/screenshot?moveCursor=maybe", ``},
		{"PUT", "expand-vm-spec", `{"spec":{"template":{"spec":{"domain":"x"}}}}`},
		{"PUT", "expand-vm-spec", strings.Repeat("{", 10000)},
		{"DELETE", "virtualmachines/vm1/stop", ``},
	} {
		f.Add(seed.method, seed.path, []byte(seed.body))
	}
	f.Fuzz(func(t *testing.T, method, path string, body []byte) {
		switch method {
		case "GET", "PUT", "POST", "DELETE", "PATCH":
		default:
			return
		}
		if strings.ContainsAny(path, " \r\n\x00#") {
			return // not a request line a client can send
		}
		vm := testVM(v1.RunStrategyManual)
		vm.Namespace = "ns"
		fx := newFixture(t, vm, runningVMI("vm1"))
		req, err := http.NewRequest(method, "http://api"+base+path, strings.NewReader(string(body)))
		if err != nil {
			return
		}
		rec := httptest.NewRecorder()
		fx.h.ServeHTTP(rec, req)
		resp := rec.Result()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode == http.StatusInternalServerError {
			t.Fatalf("%s %s: HTTP 500 %s", method, path, b)
		}
		if resp.StatusCode >= 400 && resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusMethodNotAllowed {
			var s metav1.Status
			if json.Unmarshal(b, &s) != nil || s.Kind != "Status" || s.Message == "" {
				t.Fatalf("%s %s: HTTP %d without a Status message: %q", method, path, resp.StatusCode, b)
			}
		}
	})
}
