package api_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nodevirt/nodevirt/cluster/certrotation"
	"github.com/nodevirt/nodevirt/cluster/certrotation/certrotationtest"
	"github.com/nodevirt/nodevirt/hack/testenv"
	"github.com/nodevirt/nodevirt/node/api"
)

// swappable is a serving certificate source whose certificate a test
// replaces, as a Rotator's renewal does.
type swappable struct {
	c atomic.Pointer[tls.Certificate]
}

func (s *swappable) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return s.c.Load(), nil
}

// tlsServer serves the node API's public routes with ServerTLS on a
// loopback port and returns its address and log.
func tlsServer(t *testing.T, certs api.ServingCertificates, roots certrotation.Roots) (string, *testenv.LockedBuffer) {
	t.Helper()
	e := newEnv(t, live)
	var logs testenv.LockedBuffer
	tc := api.ServerTLS(certs, roots, slog.New(slog.NewTextHandler(&logs, nil)))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.srv.ServeTLS(ctx, l, tc) }()
	t.Cleanup(func() { cancel(); <-done })
	return l.Addr().String(), &logs
}

// tlsGet GETs a public route over a fresh connection.
func tlsGet(addr string, tc *tls.Config) (int, error) {
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: tc, DisableKeepAlives: true}}
	resp, err := c.Get("https://" + addr + "/v1/namespaces/ns/virtualmachineinstances/vm/guestosinfo")
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

func TestServeTLS_OnlyNodevirtAPI(t *testing.T) {
	ca := certrotationtest.NewCA(t, "test-ca")
	bundlePath := filepath.Join(t.TempDir(), "ca.crt")
	ca.WriteBundle(t, bundlePath)
	bundle := certrotation.NewBundle(bundlePath, -1)
	addr, logs := tlsServer(t, certrotationtest.Static{Cert: ca.AgentServing(t, "node1")}, bundle)

	good := api.ClientTLS(certrotationtest.Static{Cert: ca.APIClient(t)}, bundle, "node1")
	if code, err := tlsGet(addr, good); err != nil || code != http.StatusConflict {
		t.Fatalf("nodevirt-api: %d, %v; want 409 (served; no guest agent)", code, err)
	}
	other := certrotationtest.NewCA(t, "other-ca")
	refused := map[string]*tls.Config{
		"no client certificate": {MinVersion: tls.VersionTLS13, RootCAs: ca.Pool(), ServerName: "node1"},
		"client auth, CN proxy": api.ClientTLS(certrotationtest.Static{
			Cert: ca.Issue(t, "proxy", nil, x509.ExtKeyUsageClientAuth, time.Hour)}, bundle, "node1"),
		"an agent's serving certificate": api.ClientTLS(certrotationtest.Static{Cert: ca.AgentServing(t, "node2")}, bundle, "node1"),
		"nodevirt-api of another CA":     api.ClientTLS(certrotationtest.Static{Cert: other.APIClient(t)}, bundle, "node1"),
	}
	for name, tc := range refused {
		if code, err := tlsGet(addr, tc); err == nil {
			t.Errorf("%s: served with %d, want the handshake refused", name, code)
		}
	}
	testenv.Eventually(t, 5*time.Second, "refusals logged", func() bool {
		return strings.Count(logs.String(), "refused a TLS client") >= len(refused)
	})
	if !strings.Contains(logs.String(), `subject CN \"proxy\"`) {
		t.Errorf("log does not name the refused CN:\n%s", logs.String())
	}

	// The client checks the agent: a serving certificate of another node,
	// or of another CA, is refused by nodevirt-api.
	if _, err := tlsGet(addr, api.ClientTLS(certrotationtest.Static{Cert: ca.APIClient(t)}, bundle, "node2")); err == nil {
		t.Errorf("dialing node2 reached node1's agent")
	}
	if _, err := tlsGet(addr, api.ClientTLS(certrotationtest.Static{Cert: ca.APIClient(t)},
		certrotation.StaticRoots{P: other.Pool()}, "node1")); err == nil {
		t.Errorf("a client trusting another CA accepted the agent")
	}
}

// TestServeTLS_RotationWithoutRestart replaces the serving certificate and
// the bundle (a new CA) under a running server: new handshakes use both.
func TestServeTLS_RotationWithoutRestart(t *testing.T) {
	oldCA, newCA := certrotationtest.NewCA(t, "old-ca"), certrotationtest.NewCA(t, "new-ca")
	bundlePath := filepath.Join(t.TempDir(), "ca.crt")
	oldCA.WriteBundle(t, bundlePath)
	bundle := certrotation.NewBundle(bundlePath, -1)
	certs := &swappable{}
	first := oldCA.AgentServing(t, "node1")
	certs.c.Store(&first)
	addr, _ := tlsServer(t, certs, bundle)

	oldClient := api.ClientTLS(certrotationtest.Static{Cert: oldCA.APIClient(t)}, bundle, "node1")
	if code, err := tlsGet(addr, oldClient); err != nil || code != http.StatusConflict {
		t.Fatalf("before rotation: %d, %v", code, err)
	}
	// A CA change: the bundle carries both CAs, the agent gets a
	// certificate of the new one.
	if err := os.WriteFile(bundlePath, append(oldCA.PEM(), newCA.PEM()...), 0o644); err != nil {
		t.Fatal(err)
	}
	second := newCA.AgentServing(t, "node1")
	certs.c.Store(&second)
	newClient := api.ClientTLS(certrotationtest.Static{Cert: newCA.APIClient(t)}, bundle, "node1")
	var served *x509.Certificate
	newClient.VerifyConnection = chain(newClient.VerifyConnection, func(cs tls.ConnectionState) error {
		served = cs.PeerCertificates[0]
		return nil
	})
	for name, tc := range map[string]*tls.Config{"old client": oldClient, "new client": newClient} {
		if code, err := tlsGet(addr, tc); err != nil || code != http.StatusConflict {
			t.Errorf("%s during the change: %d, %v", name, code, err)
		}
	}
	if served == nil || !served.Equal(second.Leaf) {
		t.Errorf("server did not present the renewed certificate")
	}
	// The old CA leaves the bundle: its clients are refused.
	newCA.WriteBundle(t, bundlePath)
	if _, err := tlsGet(addr, oldClient); err == nil {
		t.Errorf("a client of the removed CA was served")
	}
	if code, err := tlsGet(addr, newClient); err != nil || code != http.StatusConflict {
		t.Errorf("new client after the change: %d, %v", code, err)
	}
}

func chain(a, b func(tls.ConnectionState) error) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error {
		if err := a(cs); err != nil {
			return err
		}
		return b(cs)
	}
}
