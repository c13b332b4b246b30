package migration

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/nodevirt/nodevirt/cluster/certrotation"
	"github.com/nodevirt/nodevirt/cluster/certrotation/certrotationtest"
)

// staticCert serves one certificate to both ends of TLS.
type staticCert struct{ c tls.Certificate }

func (s staticCert) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) { return &s.c, nil }
func (s staticCert) GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return &s.c, nil
}

type targetMap map[string]Target

func (m targetMap) Target(uid string) (Target, bool) { t, ok := m[uid]; return t, ok }

// echoQEMU stands in for the target QEMU's incoming socket: it echoes what
// it reads and closes at EOF.
func echoQEMU(t *testing.T, path string) {
	serveUnix(t, path, func(c net.Conn) { _, _ = io.Copy(c, c) })
}

// serveUnix serves each connection on the unix socket path with handle,
// then closes it.
func serveUnix(t *testing.T, path string, handle func(net.Conn)) {
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				handle(c)
			}()
		}
	}()
}

type channel struct {
	ca      *certrotationtest.CA
	roots   certrotation.Roots
	addr    string
	targets targetMap
	dir     string
}

// newChannel starts a target server on node "b" whose only incoming
// migration "mig-1" comes from node "a".
func newChannel(t *testing.T) *channel {
	t.Helper()
	ca := certrotationtest.NewCA(t, "agents")
	roots := certrotation.StaticRoots{P: ca.Pool()}
	dir := t.TempDir()
	sock := filepath.Join(dir, "qemu-in.sock")
	echoQEMU(t, sock)
	targets := targetMap{"mig-1": {SourceNode: "a", Socket: sock}}
	srv := NewServer(staticCert{ca.AgentServing(t, "b")}, roots, targets, nil)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return &channel{ca: ca, roots: roots, addr: l.Addr().String(), targets: targets, dir: dir}
}

// roundTrip sends msg through a proxy presenting cert for route and returns
// what came back before the channel closed.
func (c *channel) roundTrip(t *testing.T, cert tls.Certificate, route Route, msg string) (string, error) {
	t.Helper()
	path := filepath.Join(c.dir, "out-"+route.MigrationUID+".sock")
	p, err := Dialer{Certs: staticCert{cert}, Roots: c.roots}.Listen(path, route)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	conn, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, msg); err != nil {
		return "", err
	}
	_ = conn.(*net.UnixConn).CloseWrite()
	b, err := io.ReadAll(conn)
	return string(b), err
}

func TestChannel_OverTLS(t *testing.T) {
	c := newChannel(t)
	route := Route{MigrationUID: "mig-1", TargetNode: "b", Address: c.addr}
	msg := string(make([]byte, 1<<20)) + "end"
	got, err := c.roundTrip(t, c.ca.AgentServing(t, "a"), route, msg)
	if err != nil || got != msg {
		t.Fatalf("round trip: %d bytes back, %v; want %d", len(got), err, len(msg))
	}
}

// TestChannel_Parallel sends several streams at once, as multifd does.
func TestChannel_Parallel(t *testing.T) {
	c := newChannel(t)
	route := Route{MigrationUID: "mig-1", TargetNode: "b", Address: c.addr}
	path := filepath.Join(c.dir, "out.sock")
	p, err := Dialer{Certs: staticCert{c.ca.AgentServing(t, "a")}, Roots: c.roots}.Listen(path, route)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := net.Dial("unix", path)
			if err != nil {
				t.Error(err)
				return
			}
			defer conn.Close()
			msg := string(rune('a'+i)) + "-stream"
			_, _ = io.WriteString(conn, msg)
			_ = conn.(*net.UnixConn).CloseWrite()
			if b, err := io.ReadAll(conn); err != nil || string(b) != msg {
				t.Errorf("stream %d: %q, %v", i, b, err)
			}
		}()
	}
	wg.Wait()
}

// TestChannel_Refused: every connection that is not the named source
// agent's, for a migration this node prepared, gets nothing through.
func TestChannel_Refused(t *testing.T) {
	c := newChannel(t)
	other := certrotationtest.NewCA(t, "other")
	tests := []struct {
		name  string
		cert  tls.Certificate
		route Route
	}{
		{"OtherNode", c.ca.AgentServing(t, "c"), Route{MigrationUID: "mig-1", TargetNode: "b", Address: c.addr}},
		{"UnknownMigration", c.ca.AgentServing(t, "a"), Route{MigrationUID: "mig-2", TargetNode: "b", Address: c.addr}},
		{"OtherCA", other.AgentServing(t, "a"), Route{MigrationUID: "mig-1", TargetNode: "b", Address: c.addr}},
		{"ServerAuthOnly", c.ca.Issue(t, certrotation.AgentName("a"), []string{"a"}, x509.ExtKeyUsageServerAuth, time.Hour),
			Route{MigrationUID: "mig-1", TargetNode: "b", Address: c.addr}},
		{"APIClient", c.ca.APIClient(t), Route{MigrationUID: "mig-1", TargetNode: "b", Address: c.addr}},
		// mig-1 moves no disks: no disk stream gets through.
		{"NoDisks", c.ca.AgentServing(t, "a"), Route{MigrationUID: "mig-1", TargetNode: "b", Address: c.addr, Kind: KindDisks}},
		// The source checks the target too: "b" is not the node at Address.
		{"WrongTargetName", c.ca.AgentServing(t, "a"), Route{MigrationUID: "mig-1", TargetNode: "d", Address: c.addr}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := c.roundTrip(t, tc.cert, tc.route, "secret")
			if got != "" {
				t.Errorf("got %q through (err %v), want nothing", got, err)
			}
		})
	}
}

func TestProxy_RejectsBadUID(t *testing.T) {
	_, err := Dialer{}.Listen(filepath.Join(t.TempDir(), "x.sock"), Route{MigrationUID: "a b"})
	if !errors.Is(err, ErrBadHeader) {
		t.Errorf("Listen = %v, want ErrBadHeader", err)
	}
}

// TestProxy_SocketOpenToThePod: QEMU runs as the pod's unprivileged user,
// so the proxy socket must be writable by others (its directory is the
// pod's own).
func TestProxy_SocketOpenToThePod(t *testing.T) {
	c := newChannel(t)
	path := filepath.Join(c.dir, "out-mode.sock")
	p, err := Dialer{Certs: staticCert{c.ca.AgentServing(t, "a")}, Roots: c.roots}.Listen(path, Route{MigrationUID: "mig-mode", TargetNode: "b", Address: c.addr})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm&0o002 == 0 {
		t.Errorf("proxy socket mode %v: QEMU as the pod's user could not connect", perm)
	}
}

// TestChannel_DisksToTheirSocket: a disk stream reaches the target QEMU's
// NBD socket, not its incoming migration socket.
func TestChannel_DisksToTheirSocket(t *testing.T) {
	c := newChannel(t)
	nbd := filepath.Join(c.dir, "nbd.sock")
	serveUnix(t, nbd, func(conn net.Conn) {
		b, _ := io.ReadAll(conn)
		_, _ = io.WriteString(conn, "nbd:"+string(b))
	})
	tgt := c.targets["mig-1"]
	tgt.DiskSocket = nbd
	c.targets["mig-1"] = tgt
	route := Route{MigrationUID: "mig-1", TargetNode: "b", Address: c.addr, Kind: KindDisks}
	if got, err := c.roundTrip(t, c.ca.AgentServing(t, "a"), route, "block"); err != nil || got != "nbd:block" {
		t.Errorf("disk stream: %q, %v; want %q", got, err, "nbd:block")
	}
	route.Kind = KindState
	if got, err := c.roundTrip(t, c.ca.AgentServing(t, "a"), route, "ram"); err != nil || got != "ram" {
		t.Errorf("state stream: %q, %v; want the echo %q", got, err, "ram")
	}
}
