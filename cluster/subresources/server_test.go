package subresources

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericoptions "k8s.io/apiserver/pkg/server/options"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	nodeapi "github.com/nodevirt/nodevirt/node/api"
)

// recorder is an authorizer that allows everything and records the
// attributes of resource requests.
type recorder struct {
	mu    sync.Mutex
	attrs []authorizer.Attributes
}

func (r *recorder) Authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if a.IsResourceRequest() {
		r.attrs = append(r.attrs, a)
	}
	return authorizer.DecisionAllow, "", nil
}

func (r *recorder) last() authorizer.Attributes {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.attrs) == 0 {
		return nil
	}
	return r.attrs[len(r.attrs)-1]
}

// serverFixture runs the handler inside the real generic API server (the
// k8s.io/apiserver filter chain) with a fixed user and the recorder.
type serverFixture struct {
	*fixture
	url    string
	authz  *recorder
	client *http.Client
}

func startServer(t *testing.T, f *fixture, requestTimeout time.Duration) *serverFixture {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	so := genericoptions.NewSecureServingOptions().WithLoopback()
	so.Listener, so.BindPort = ln, ln.Addr().(*net.TCPAddr).Port
	so.ServerCert.CertDirectory = t.TempDir()
	if err := so.MaybeDefaultWithSelfSignedCerts("localhost", nil, []net.IP{net.ParseIP("127.0.0.1")}); err != nil {
		t.Fatal(err)
	}
	cfg := newConfig()
	cfg.RequestTimeout = requestTimeout
	if err := so.ApplyTo(&cfg.SecureServing, &cfg.LoopbackClientConfig); err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	cfg.Authentication.Authenticator = authenticator.RequestFunc(func(*http.Request) (*authenticator.Response, bool, error) {
		return &authenticator.Response{User: &user.DefaultInfo{Name: "alice", Groups: []string{"system:authenticated"}}}, true, nil
	})
	cfg.Authorization.Authorizer = rec
	srv, err := newServer(cfg, f.h)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("server did not stop")
		}
	})
	sf := &serverFixture{fixture: f, url: "https://" + ln.Addr().String(), authz: rec, client: &http.Client{
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, // test server, self-signed
		Timeout:   10 * time.Second,
	}}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := sf.client.Get(sf.url + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return sf
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("server not healthy: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestServer_AuthorizationAttributes checks the attributes the generic
// server's RequestInfo derives are the ones KubeVirt's ClusterRoles name.
func TestServer_AuthorizationAttributes(t *testing.T) {
	vm := testVM(v1.RunStrategyAlways)
	vm.Namespace = "ns"
	f := newFixture(t, vm, runningVMI("vm1", v1.VirtualMachineInstanceAgentConnected))
	sf := startServer(t, f, time.Minute)
	for _, tt := range []struct {
		method, path           string
		verb, resource, subres string
		name                   string
	}{
		{"PUT", "virtualmachineinstances/vm1/pause", "update", "virtualmachineinstances", "pause", "vm1"},
		{"PUT", "virtualmachineinstances/vm1/unpause", "update", "virtualmachineinstances", "unpause", "vm1"},
		{"PUT", "virtualmachineinstances/vm1/softreboot", "update", "virtualmachineinstances", "softreboot", "vm1"},
		{"PUT", "virtualmachineinstances/vm1/reset", "update", "virtualmachineinstances", "reset", "vm1"},
		{"PUT", "virtualmachineinstances/vm1/freeze", "update", "virtualmachineinstances", "freeze", "vm1"},
		{"PUT", "virtualmachineinstances/vm1/unfreeze", "update", "virtualmachineinstances", "unfreeze", "vm1"},
		{"GET", "virtualmachineinstances/vm1/guestosinfo", "get", "virtualmachineinstances", "guestosinfo", "vm1"},
		{"GET", "virtualmachineinstances/vm1/userlist", "get", "virtualmachineinstances", "userlist", "vm1"},
		{"GET", "virtualmachineinstances/vm1/filesystemlist", "get", "virtualmachineinstances", "filesystemlist", "vm1"},
		{"GET", "virtualmachineinstances/vm1/console", "get", "virtualmachineinstances", "console", "vm1"},
		{"GET", "virtualmachineinstances/vm1/vnc", "get", "virtualmachineinstances", "vnc", "vm1"},
		// As in virt-api: the segment after the subresource is not part of it.
		{"GET", "virtualmachineinstances/vm1/vnc/screenshot", "get", "virtualmachineinstances", "vnc", "vm1"},
		{"GET", "virtualmachineinstances/vm1/portforward/22/tcp", "get", "virtualmachineinstances", "portforward", "vm1"},
		{"PUT", "virtualmachines/vm1/start", "update", "virtualmachines", "start", "vm1"},
		{"PUT", "virtualmachines/vm1/stop", "update", "virtualmachines", "stop", "vm1"},
		{"PUT", "virtualmachines/vm1/restart", "update", "virtualmachines", "restart", "vm1"},
		{"PUT", "virtualmachines/vm1/migrate", "update", "virtualmachines", "migrate", "vm1"},
		{"GET", "virtualmachines/vm1/expand-spec", "get", "virtualmachines", "expand-spec", "vm1"},
		{"GET", "virtualmachines/vm1/portforward/22", "get", "virtualmachines", "portforward", "vm1"},
		{"PUT", "expand-vm-spec", "update", "expand-vm-spec", "", ""},
	} {
		for _, v := range Versions {
			path := strings.Replace(base, "/v1/", "/"+v+"/", 1) + tt.path
			req, _ := http.NewRequest(tt.method, sf.url+path, strings.NewReader("{}"))
			resp, err := sf.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			a := sf.authz.last()
			if a == nil {
				t.Fatalf("%s %s: not authorized as a resource request", tt.method, path)
			}
			got := fmt.Sprintf("%s %s/%s %s/%s %s", a.GetVerb(), a.GetAPIGroup(), a.GetAPIVersion(), a.GetResource(), a.GetSubresource(), a.GetNamespace()+"/"+a.GetName())
			want := fmt.Sprintf("%s %s/%s %s/%s %s", tt.verb, Group, v, tt.resource, tt.subres, "ns/"+tt.name)
			if got != want {
				t.Errorf("%s %s: attributes %q, want %q", tt.method, path, got, want)
			}
		}
	}
}

// TestServer_Discovery checks the group is in /apis and its documents are
// served through the generic server.
func TestServer_Discovery(t *testing.T) {
	sf := startServer(t, newFixture(t), time.Minute)
	sf.client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	for _, p := range []string{"/apis", "/apis/subresources.kubevirt.io", "/apis/subresources.kubevirt.io/v1", "/apis/subresources.kubevirt.io/v1alpha3/version"} {
		resp, err := sf.client.Get(sf.url + p)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		_, _ = fmt.Fprint(&b, resp.Status)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("GET %s: %s", p, b.String())
		}
	}
}

// TestServer_ConsoleStreamOutlivesRequestTimeout opens a console through
// the generic server with a 1 s request timeout: the stream keeps working
// past it, the agent's pings reach the client and the client's pongs
// reach the agent.
func TestServer_ConsoleStreamOutlivesRequestTimeout(t *testing.T) {
	f := newFixtureWithAgent(t, startFakeAgent(t, 200*time.Millisecond), runningVMI("vm1"))
	sf := startServer(t, f, time.Second)

	d := websocket.Dialer{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, Subprotocols: []string{nodeapi.Subprotocol}} // test server
	url := strings.Replace(sf.url, "https", "wss", 1) + base + "virtualmachineinstances/vm1/console"
	ws, resp, err := d.Dial(url, nil)
	if err != nil {
		t.Fatalf("dial console: %v (%v)", err, resp)
	}
	defer ws.Close()
	if ws.Subprotocol() != nodeapi.Subprotocol {
		t.Errorf("subprotocol %q, want %q", ws.Subprotocol(), nodeapi.Subprotocol)
	}
	pings := make(chan struct{}, 64)
	ws.SetPingHandler(func(data string) error {
		select {
		case pings <- struct{}{}:
		default:
		}
		return ws.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(time.Second))
	})
	msgs := make(chan string, 4)
	go func() {
		for {
			_, b, err := ws.ReadMessage()
			if err != nil {
				close(msgs)
				return
			}
			msgs <- string(b)
		}
	}()
	deadline := time.After(3 * time.Second) // three request timeouts
	for i := 0; ; i++ {
		if err := ws.WriteMessage(websocket.BinaryMessage, fmt.Appendf(nil, "hello %d", i)); err != nil {
			t.Fatalf("write after %d messages: %v", i, err)
		}
		select {
		case m, ok := <-msgs:
			if !ok {
				t.Fatalf("stream closed after %d messages", i)
			}
			if m != fmt.Sprintf("hello %d", i) {
				t.Fatalf("echo %q, want hello %d", m, i)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no echo of message %d", i)
		}
		select {
		case <-deadline:
			if len(pings) == 0 {
				t.Error("no ping from the agent reached the client")
			}
			if len(f.agent.pongs) == 0 {
				t.Error("no pong from the client reached the agent")
			}
			return
		case <-time.After(300 * time.Millisecond):
		}
	}
}
