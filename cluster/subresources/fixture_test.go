package subresources

import (
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/cluster/certrotation"
	"github.com/nodevirt/nodevirt/cluster/certrotation/certrotationtest"
	"github.com/nodevirt/nodevirt/cluster/client/clientset/versioned/fake"
	nodeapi "github.com/nodevirt/nodevirt/node/api"
)

// agentCall is one request the fake agent received.
type agentCall struct {
	Method, Path, Query, Body string
	ClientCN                  string
}

// fakeAgent stands in for a node agent: mutual TLS with a test CA, a
// serving certificate for node "node1", records every request, answers
// {"path": ...}, 409 {"error": ...} for paths ending in /conflict, and
// runs a websocket echo with pings for stream routes.
type fakeAgent struct {
	srv       *httptest.Server
	clientTLS ClientTLS
	port      int

	mu    sync.Mutex
	calls []agentCall
	pongs chan struct{}
}

const testNode = "node1"

func startFakeAgent(t *testing.T, pingPeriod time.Duration) *fakeAgent {
	t.Helper()
	ca := certrotationtest.NewCA(t, "test-ca")
	roots := certrotation.StaticRoots{P: ca.Pool()}
	stc := nodeapi.ServerTLS(certrotationtest.Static{Cert: ca.AgentServing(t, testNode)}, roots, nil)
	client := certrotationtest.Static{Cert: ca.APIClient(t)}
	a := &fakeAgent{
		clientTLS: func(node string) (*tls.Config, error) { return nodeapi.ClientTLS(client, roots, node), nil },
		pongs:     make(chan struct{}, 16),
	}
	a.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		call := agentCall{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Body: string(b)}
		if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
			call.ClientCN = r.TLS.PeerCertificates[0].Subject.CommonName
		}
		a.mu.Lock()
		a.calls = append(a.calls, call)
		a.mu.Unlock()
		if websocket.IsWebSocketUpgrade(r) {
			a.echo(w, r, pingPeriod)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if len(r.URL.Path) > 9 && r.URL.Path[len(r.URL.Path)-9:] == "/conflict" {
			w.WriteHeader(http.StatusConflict)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": "agent says no"})
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"path": r.URL.Path})
	}))
	a.srv.TLS = stc
	a.srv.StartTLS()
	t.Cleanup(a.srv.Close)
	_, port, _ := net.SplitHostPort(a.srv.Listener.Addr().String())
	a.port, _ = strconv.Atoi(port)
	return a
}

// echo upgrades with plain.kubevirt.io, echoes messages and pings every
// period, reporting each pong.
func (a *fakeAgent) echo(w http.ResponseWriter, r *http.Request, period time.Duration) {
	up := websocket.Upgrader{Subprotocols: []string{nodeapi.Subprotocol}}
	ws, err := up.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer ws.Close()
	ws.SetPongHandler(func(string) error {
		select {
		case a.pongs <- struct{}{}:
		default:
		}
		return nil
	})
	done := make(chan struct{})
	defer close(done)
	go func() {
		tk := time.NewTicker(period)
		defer tk.Stop()
		for {
			select {
			case <-done:
				return
			case <-tk.C:
				if ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(time.Second)) != nil {
					return
				}
			}
		}
	}()
	for {
		mt, msg, err := ws.ReadMessage()
		if err != nil {
			return
		}
		if ws.WriteMessage(mt, msg) != nil {
			return
		}
	}
}

func (a *fakeAgent) lastCall(t *testing.T) agentCall {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.calls) == 0 {
		t.Fatal("the agent got no request")
	}
	return a.calls[len(a.calls)-1]
}

func (a *fakeAgent) callCount() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.calls)
}

// staticAgents locates every node's agent at one IP.
type staticAgents map[string]string

func (s staticAgents) AgentIP(node string) (string, error) {
	if ip, ok := s[node]; ok {
		return ip, nil
	}
	return "", ErrNoAgent
}

type fixture struct {
	h     *Handler
	kv    *fake.Clientset
	kube  *kubefake.Clientset
	agent *fakeAgent
}

func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	t.Helper()
	return newFixtureWithAgent(t, startFakeAgent(t, time.Hour), objs...)
}

func newFixtureWithAgent(t *testing.T, agent *fakeAgent, objs ...runtime.Object) *fixture {
	t.Helper()
	f := &fixture{kv: fake.NewSimpleClientset(objs...), kube: kubefake.NewClientset(), agent: agent}
	h, err := New(Config{AgentPort: agent.port, Version: VersionInfo{GitVersion: "v-test"}}, Deps{
		KubeVirt:  f.kv,
		Kube:      f.kube,
		Agents:    staticAgents{testNode: "127.0.0.1"},
		ClientTLS: agent.clientTLS,
	})
	if err != nil {
		t.Fatal(err)
	}
	f.h = h
	return f
}

// runningVMI is a Running VMI on testNode with the given true conditions.
func runningVMI(name string, conds ...v1.VirtualMachineInstanceConditionType) *v1.VirtualMachineInstance {
	vmi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)}}
	vmi.Status.Phase = v1.Running
	vmi.Status.NodeName = testNode
	for _, c := range conds {
		vmi.Status.Conditions = append(vmi.Status.Conditions, v1.VirtualMachineInstanceCondition{Type: c, Status: corev1.ConditionTrue})
	}
	return vmi
}
