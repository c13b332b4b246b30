package launcher

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodevirt/nodevirt/node/launchspec"
)

// FuzzControlSocket sends arbitrary requests to the launcher's control
// socket (a real Server on a unix socket, QEMU a missing binary): every
// answer is a 2xx or a 4xx with a JSON error, never a crash or a 5xx, and
// a refused launch leaves the launcher waiting (nothing half-started).
func FuzzControlSocket(f *testing.F) {
	encode := func(s launchspec.Spec) []byte {
		b, err := json.Marshal(s)
		if err != nil {
			f.Fatal(err)
		}
		return b
	}
	valid := func(mut func(*launchspec.Spec)) []byte {
		s := launchspec.Spec{Args: []string{"-S"}}
		mut(&s)
		return encode(sealed(f, s))
	}
	mismatch := sealed(f, launchspec.Spec{Args: []string{"-S"}})
	mismatch.Hash = strings.Repeat("0", len(mismatch.Hash)) // sealed, then its hash no longer matches
	f.Add("PUT", "/v1/launch", []byte(`{`))
	f.Add("PUT", "/v1/launch", []byte(`{"version":1,"args":["-S"]} trailing`))
	f.Add("PUT", "/v1/launch", []byte(`{"version":1,"args":["-S"],"hash":"x","evil":1}`))
	f.Add("PUT", "/v1/launch", []byte(`[]`))
	f.Add("PUT", "/v1/launch", []byte(`null`))
	f.Add("PUT", "/v1/launch", bytes.Repeat([]byte(" "), 5<<20))
	f.Add("PUT", "/v1/launch", valid(func(s *launchspec.Spec) { s.GracePeriodSeconds = -1 }))
	f.Add("PUT", "/v1/launch", valid(func(s *launchspec.Spec) {
		s.Disks = []launchspec.DiskPrep{{Volume: "e", Kind: launchspec.EmptyDisk, Target: "/etc/../etc/shadow", Format: "raw", SizeBytes: 1}}
	}))
	f.Add("PUT", "/v1/launch", valid(func(s *launchspec.Spec) {
		s.Disks = []launchspec.DiskPrep{{Volume: "../x", Kind: launchspec.PVCFile, Target: "/pvc/../x/disk.img"}}
	}))
	f.Add("PUT", "/v1/launch", encode(mismatch))
	f.Add("PUT", "/v1/launch", valid(func(*launchspec.Spec) {})) // a real launch, QEMU missing
	f.Add("GET", "/v1/status", []byte(nil))
	f.Add("POST", "/v1/launch", []byte(`{}`))
	f.Add("DELETE", "/v1/status", []byte(nil))
	f.Add("GET", "/v1/../../etc/passwd", []byte(nil))
	f.Add("PUT", "/v1/launch?x=%00", []byte("\x00\xff\xfe"))
	f.Fuzz(func(t *testing.T, method, path string, body []byte) {
		if !validMethod(method) || !strings.HasPrefix(path, "/") || strings.ContainsAny(path, " \r\n\x00#") {
			return // not an HTTP request line a client can send
		}
		_, c, dir, _ := startServer(t)
		hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", filepath.Join(dir, launchspec.LauncherSocket))
		}}}
		req, err := http.NewRequest(method, "http://launcher"+path, bytes.NewReader(body))
		if err != nil {
			return
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 500 {
			t.Fatalf("%s %s: HTTP %d %s", method, path, resp.StatusCode, b)
		}
		if resp.StatusCode >= 400 && resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusMethodNotAllowed {
			var e errorBody
			if json.Unmarshal(b, &e) != nil || e.Error == "" {
				t.Fatalf("%s %s: HTTP %d without a JSON error: %q", method, path, resp.StatusCode, b)
			}
		}
		st, err := c.Status(context.Background())
		if err != nil {
			t.Fatalf("the launcher stopped answering after %s %s: %v", method, path, err)
		}
		if resp.StatusCode == http.StatusBadRequest && st.State != StateWaiting {
			t.Fatalf("a refused launch left the launcher %s", st.State)
		}
	})
}

func validMethod(m string) bool {
	switch m {
	case "GET", "PUT", "POST", "DELETE", "PATCH", "HEAD", "OPTIONS":
		return true
	}
	return false
}
