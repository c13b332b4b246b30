package migration

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"github.com/nodevirt/nodevirt/cluster/certrotation"
	"github.com/nodevirt/nodevirt/node/unixsock"
)

// Dialer is the source end's TLS configuration: the agent's certificate
// and the trust bundle.
type Dialer struct {
	Certs Certificates
	Roots certrotation.Roots
	Log   *slog.Logger
}

// Route is where one outgoing migration goes.
type Route struct {
	MigrationUID string
	// TargetNode names the target agent (its certificate's DNS name and CN).
	TargetNode string
	// Address is the target agent's migration listener, host:port
	// (migrationState.targetNodeAddress).
	Address string
	// Kind is what the proxied connections carry (one proxy per kind).
	Kind Kind
}

// Proxy listens on a unix socket for the source QEMU's migration
// connections and forwards each over a new mutual-TLS connection to the
// target agent.
type Proxy struct {
	route  Route
	path   string
	tls    *tls.Config
	l      net.Listener
	log    *slog.Logger
	cancel context.CancelFunc
	done   chan struct{}

	forwards sync.WaitGroup

	mu     sync.Mutex
	stream uint16
	conns  map[net.Conn]struct{}
}

// drainTimeout is how long Close lets the forwarded streams finish: when
// QEMU reports a migration completed, its last bytes may still be on their
// way to the target.
const drainTimeout = 10 * time.Second

// Listen starts a proxy for route on the unix socket path (replacing a
// stale socket file). Close it when the migration ended.
func (d Dialer) Listen(path string, route Route) (*Proxy, error) {
	if err := (Header{MigrationUID: route.MigrationUID, Kind: route.Kind}).validate(); err != nil {
		return nil, err
	}
	_ = os.Remove(path)
	l, err := unixsock.Listen(path)
	if err != nil {
		return nil, fmt.Errorf("migration %s: proxy socket: %w", route.MigrationUID, err)
	}
	// QEMU runs as the pod's unprivileged user and needs write permission
	// to connect. The socket lives in the pod's own sockets directory,
	// which only that pod's containers (the launcher and QEMU) and root on
	// the host can reach.
	if err := os.Chmod(path, 0o666); err != nil {
		l.Close()
		_ = os.Remove(path)
		return nil, fmt.Errorf("migration %s: proxy socket: %w", route.MigrationUID, err)
	}
	log := d.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{route: route, path: path, tls: clientTLS(d.Certs, d.Roots, route.TargetNode), l: l,
		log: log.With("migration", route.MigrationUID, "target", route.Address), cancel: cancel,
		done: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	go p.accept(ctx)
	return p, nil
}

// Close stops listening and removes the socket, lets the forwarded streams
// finish for up to drainTimeout (both ends close them once the migration
// ended), then cuts what is left.
func (p *Proxy) Close() error {
	err := p.l.Close()
	<-p.done
	_ = os.Remove(p.path)
	drained := make(chan struct{})
	go func() {
		p.forwards.Wait()
		close(drained)
	}()
	select {
	case <-drained:
	case <-time.After(drainTimeout):
	}
	p.cancel()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	return err
}

func (p *Proxy) accept(ctx context.Context) {
	defer close(p.done)
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		h := Header{MigrationUID: p.route.MigrationUID, Kind: p.route.Kind, Stream: p.stream}
		p.stream++
		p.conns[c] = struct{}{}
		p.mu.Unlock()
		p.forwards.Add(1)
		go func() {
			defer p.forwards.Done()
			p.forward(ctx, c, h)
		}()
	}
}

// forward dials the target, sends the header and pipes c to it.
func (p *Proxy) forward(ctx context.Context, c net.Conn, h Header) {
	defer func() {
		c.Close()
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
	}()
	dctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
	tc, err := (&tls.Dialer{Config: p.tls}).DialContext(dctx, "tcp", p.route.Address)
	cancel()
	if err != nil {
		p.log.Warn("migration channel: dial target", "stream", h.Stream, "err", err)
		return
	}
	p.mu.Lock()
	p.conns[tc] = struct{}{}
	p.mu.Unlock()
	defer func() {
		tc.Close()
		p.mu.Lock()
		delete(p.conns, tc)
		p.mu.Unlock()
	}()
	if _, err := h.WriteTo(tc); err != nil {
		p.log.Warn("migration channel: header", "stream", h.Stream, "err", err)
		return
	}
	p.log.Info("migration channel: stream opened", "stream", h.Stream)
	n := pipe(c, tc)
	p.log.Info("migration channel: stream closed", "stream", h.Stream, "bytes", n)
}
