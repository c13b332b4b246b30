package profiling

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestHandler(t *testing.T) {
	mux := http.NewServeMux()
	mux.Handle(Prefix, Handler())
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for path, want := range map[string]string{
		"cmdline":           "profiling.test",
		"heap?debug=1":      "heap profile",
		"goroutine?debug=1": "goroutine profile",
	} {
		resp, err := http.Get(srv.URL + Prefix + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), want) {
			t.Errorf("GET %s: %d, want 200 with %q", path, resp.StatusCode, want)
		}
	}
}
