package consoleui

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/gorilla/websocket"
	"k8s.io/client-go/rest"
)

// fakeAPI is an HTTPS, HTTP/2-capable stand-in for the API server that
// records what reaches it.
type fakeAPI struct {
	srv  *httptest.Server
	seen chan *http.Request
}

func startFakeAPI(t *testing.T) *fakeAPI {
	t.Helper()
	f := &fakeAPI{seen: make(chan *http.Request, 10)}
	up := websocket.Upgrader{Subprotocols: []string{"plain.kubevirt.io"}}
	mux := http.NewServeMux()
	mux.HandleFunc("/apis/subresources.kubevirt.io/v1/namespaces/ns/virtualmachineinstances/vm/console", func(w http.ResponseWriter, r *http.Request) {
		f.seen <- r
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		for {
			mt, p, err := c.ReadMessage()
			if err != nil {
				return
			}
			if err := c.WriteMessage(mt, append([]byte("echo:"), p...)); err != nil {
				return
			}
		}
	})
	mux.HandleFunc("/api/v1/watch", func(w http.ResponseWriter, r *http.Request) {
		f.seen <- r
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"type":"ADDED"}`+"\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done() // a watch stays open
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		f.seen <- r
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"path":"`+r.URL.Path+`"}`)
	})
	f.srv = httptest.NewUnstartedServer(mux)
	f.srv.EnableHTTP2 = true
	f.srv.StartTLS()
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeAPI) last(t *testing.T) *http.Request {
	t.Helper()
	select {
	case r := <-f.seen:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("no request reached the API server")
		return nil
	}
}

// startServer runs a console server for the user "alice" of api and
// returns its origin and a logged-in client.
func startServer(t *testing.T, api *fakeAPI) (string, *http.Client) {
	t.Helper()
	rc := &rest.Config{Host: api.srv.URL, BearerToken: "alice-token", TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
	s, err := Listen(Config{Kube: Kube{Rest: rc, Namespace: "ns", Context: "ctx"}, Address: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return openSession(t, s.URL())
}

// openSession opens the URL with the token and returns the server's origin and
// a client holding the session cookie.
func openSession(t *testing.T, tokenURL string) (string, *http.Client) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	res, err := c.Get(tokenURL)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.Request.URL.RawQuery != "" {
		t.Errorf("after login the URL is %s, want no token in it", res.Request.URL)
	}
	u, _ := url.Parse(tokenURL)
	return u.Scheme + "://" + u.Host, c
}

func TestServer_ProxyUsesUserCredentialsAndStripsBrowserHeaders(t *testing.T) {
	api := startFakeAPI(t)
	origin, c := startServer(t, api)
	req, _ := http.NewRequest(http.MethodPut, origin+"/k8s/apis/subresources.kubevirt.io/v1/namespaces/ns/virtualmachineinstances/vm/pause?dryRun=All", strings.NewReader("{}"))
	req.Header.Set("Origin", origin)
	req.Header.Set("Referer", origin+"/")
	req.Header.Set("Authorization", "Bearer forged")
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.Contains(string(body), "/pause") {
		t.Fatalf("PUT through the proxy: %d %s", res.StatusCode, body)
	}
	got := api.last(t)
	if got.Header.Get("Authorization") != "Bearer alice-token" {
		t.Errorf("Authorization at the API server = %q, want the kubeconfig's token", got.Header.Get("Authorization"))
	}
	for _, h := range []string{"Cookie", "Origin", "Referer"} {
		if v := got.Header.Get(h); v != "" {
			t.Errorf("%s reached the API server: %q", h, v)
		}
	}
	if got.URL.Path != "/apis/subresources.kubevirt.io/v1/namespaces/ns/virtualmachineinstances/vm/pause" || got.URL.RawQuery != "dryRun=All" {
		t.Errorf("API server saw %s", got.URL)
	}
	if got.Method != http.MethodPut {
		t.Errorf("method %s, want PUT", got.Method)
	}
}

func TestServer_WebsocketPassesThrough(t *testing.T) {
	api := startFakeAPI(t)
	origin, c := startServer(t, api)
	u, _ := url.Parse(origin)
	h := http.Header{"Origin": {origin}}
	for _, ck := range c.Jar.Cookies(u) {
		h.Add("Cookie", ck.String())
	}
	d := websocket.Dialer{Subprotocols: []string{"plain.kubevirt.io"}, HandshakeTimeout: 5 * time.Second}
	ws, res, err := d.Dial("ws://"+u.Host+"/k8s/apis/subresources.kubevirt.io/v1/namespaces/ns/virtualmachineinstances/vm/console", h)
	if err != nil {
		t.Fatalf("dial console through the proxy: %v (response %v)", err, res)
	}
	defer ws.Close()
	if ws.Subprotocol() != "plain.kubevirt.io" {
		t.Errorf("subprotocol %q, want plain.kubevirt.io", ws.Subprotocol())
	}
	if got := api.last(t); got.Header.Get("Authorization") != "Bearer alice-token" || got.Header.Get("Origin") != "" {
		t.Errorf("upgrade at the API server: Authorization %q Origin %q", got.Header.Get("Authorization"), got.Header.Get("Origin"))
	}
	if err := ws.WriteMessage(websocket.BinaryMessage, []byte("ls\r")); err != nil {
		t.Fatal(err)
	}
	_ = ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	mt, p, err := ws.ReadMessage()
	if err != nil || mt != websocket.BinaryMessage || string(p) != "echo:ls\r" {
		t.Errorf("read = %d %q %v, want binary echo:ls\\r", mt, p, err)
	}
}

func TestServer_WebsocketFromAnotherSiteRefused(t *testing.T) {
	api := startFakeAPI(t)
	origin, c := startServer(t, api)
	u, _ := url.Parse(origin)
	h := http.Header{"Origin": {"http://evil.example"}}
	for _, ck := range c.Jar.Cookies(u) {
		h.Add("Cookie", ck.String())
	}
	d := websocket.Dialer{Subprotocols: []string{"plain.kubevirt.io"}, HandshakeTimeout: 5 * time.Second}
	_, res, err := d.Dial("ws://"+u.Host+"/k8s/apis/subresources.kubevirt.io/v1/namespaces/ns/virtualmachineinstances/vm/console", h)
	if err == nil || res == nil || res.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-site websocket: err %v, response %v; want 403", err, res)
	}
	select {
	case r := <-api.seen:
		t.Errorf("a refused request reached the API server: %s", r.URL)
	default:
	}
}

func TestServer_WatchStreams(t *testing.T) {
	api := startFakeAPI(t)
	origin, c := startServer(t, api)
	res, err := c.Get(origin + "/k8s/api/v1/watch")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	line := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(res.Body).ReadString('\n')
		line <- l
	}()
	select {
	case l := <-line:
		if !strings.Contains(l, "ADDED") {
			t.Errorf("first watch line %q", l)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the watch event did not come through while the stream is open (not flushed)")
	}
}

func TestServer_WithoutTokenUnauthorized(t *testing.T) {
	api := startFakeAPI(t)
	origin, _ := startServer(t, api)
	for _, p := range []string{"/", "/info", "/k8s/api/v1/namespaces"} {
		res, err := http.Get(origin + p)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET %s without the cookie: %d, want 401", p, res.StatusCode)
		}
	}
}

func TestServer_Info(t *testing.T) {
	api := startFakeAPI(t)
	origin, c := startServer(t, api)
	res, err := c.Get(origin + "/info")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if !strings.Contains(string(b), `"namespace":"ns"`) || !strings.Contains(string(b), `"context":"ctx"`) {
		t.Errorf("info = %s", b)
	}
	if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
		t.Errorf("CSP = %q", csp)
	}
}

func TestServer_APIServerDownIsAStatus(t *testing.T) {
	api := startFakeAPI(t)
	origin, c := startServer(t, api)
	api.srv.Close()
	res, err := c.Get(origin + "/k8s/api/v1/namespaces")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusBadGateway || !strings.Contains(string(b), `"kind":"Status"`) {
		t.Errorf("API server down: %d %s, want 502 and a Status", res.StatusCode, b)
	}
}

func TestConfig_Validate(t *testing.T) {
	k := Kube{Rest: &rest.Config{Host: "https://x"}}
	for _, c := range []struct {
		cfg Config
		ok  bool
	}{
		{Config{Kube: k, Address: "127.0.0.1"}, true},
		{Config{Kube: k, Address: "::1", Port: 8080}, true},
		{Config{Kube: k, Address: "0.0.0.0"}, false},
		{Config{Kube: k, Address: "192.168.1.5"}, false},
		{Config{Kube: k, Address: "localhost"}, false},
		{Config{Kube: k, Address: "127.0.0.1", Port: 70000}, false},
		{Config{Address: "127.0.0.1"}, false},
	} {
		if err := c.cfg.Validate(); (err == nil) != c.ok {
			t.Errorf("Validate(%s:%d) = %v, want ok=%v", c.cfg.Address, c.cfg.Port, err, c.ok)
		}
	}
}

func TestAssets_NotBuilt(t *testing.T) {
	h := assetsFrom(fstest.MapFS{"README.md": {Data: []byte("x")}})
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
	if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), "make console-ui") {
		t.Errorf("without a bundle: %d %q", w.Code, w.Body.String())
	}
}

func TestAssets_Built(t *testing.T) {
	h := assetsFrom(fstest.MapFS{"index.html": {Data: []byte("<p>page</p>")}, "app.js": {Data: []byte("1")}})
	for path, want := range map[string]string{"/": "<p>page</p>", "/app.js": "1"} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
		if w.Code != http.StatusOK || w.Body.String() != want {
			t.Errorf("GET %s: %d %q, want %q", path, w.Code, w.Body.String(), want)
		}
	}
}
