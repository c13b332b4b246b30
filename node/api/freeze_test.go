package api_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFreeze_UnfreezeTimeout(t *testing.T) {
	e := newEnv(t, live)
	path := "/v1/namespaces/ns/virtualmachineinstances/vm/freeze"
	for _, tt := range []struct {
		name, body string
		wantCode   int
		wantCall   string // the Domains call, "" for none
		wantErr    string // in the error body
	}{
		{"no body", "", http.StatusOK, "freeze 5m0s u1", ""},
		{"blank body", " \n", http.StatusOK, "freeze 5m0s u1", ""},
		{"empty object", "{}", http.StatusOK, "freeze 5m0s u1", ""},
		{"null", `{"unfreezeTimeout":null}`, http.StatusOK, "freeze 5m0s u1", ""},
		{"virtctl default", `{"unfreezeTimeout":"5m0s"}`, http.StatusOK, "freeze 5m0s u1", ""},
		{"short", `{"unfreezeTimeout":"2s"}`, http.StatusOK, "freeze 2s u1", ""},
		{"the cap", `{"unfreezeTimeout":"1h"}`, http.StatusOK, "freeze 1h0m0s u1", ""},
		{"zero", `{"unfreezeTimeout":"0s"}`, http.StatusBadRequest, "", "unfreezeTimeout 0s: want a positive duration"},
		{"negative", `{"unfreezeTimeout":"-5m"}`, http.StatusBadRequest, "", "unfreezeTimeout -5m0s: want a positive duration"},
		{"above the cap", `{"unfreezeTimeout":"61m"}`, http.StatusBadRequest, "", "unfreezeTimeout 1h1m0s: want at most 1h0m0s"},
		{"not a duration", `{"unfreezeTimeout":"forever"}`, http.StatusBadRequest, "", "unfreezeTimeout"},
		{"a number", `{"unfreezeTimeout":300}`, http.StatusBadRequest, "", "unfreezeTimeout"},
		{"not JSON", `unfreezeTimeout=5m`, http.StatusBadRequest, "", "unfreezeTimeout"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e.domains.mu.Lock()
			e.domains.calls = nil
			e.domains.mu.Unlock()
			req, _ := http.NewRequest(http.MethodPut, "http://agent"+path, strings.NewReader(tt.body))
			resp, err := e.client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.wantCode || !strings.Contains(string(b), tt.wantErr) {
				t.Errorf("PUT freeze %s: %d %s, want %d containing %q", tt.body, resp.StatusCode, b, tt.wantCode, tt.wantErr)
			}
			var want []string
			if tt.wantCall != "" {
				want = []string{tt.wantCall}
			}
			if diff := cmp.Diff(want, e.domains.calls); diff != "" {
				t.Errorf("domain calls (-want +got):\n%s", diff)
			}
		})
	}
}
