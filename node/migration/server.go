package migration

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/nodevirt/nodevirt/cluster/certrotation"
	"github.com/nodevirt/nodevirt/node/unixsock"
)

// handshakeTimeout bounds the TLS handshake and the header of a connection.
const handshakeTimeout = 10 * time.Second

// Target is one incoming migration the agent prepared.
type Target struct {
	// SourceNode is the only node whose agent may send it.
	SourceNode string
	// Socket is the host path of the target QEMU's incoming unix socket.
	Socket string
	// DiskSocket is the host path of the target QEMU's NBD server socket
	// ("" when the migration moves no disks).
	DiskSocket string
}

// socket is where a stream of kind goes.
func (t Target) socket(k Kind) string {
	if k == KindDisks {
		return t.DiskSocket
	}
	return t.Socket
}

// Targets tells the server which migrations it accepts (the agent's target
// records).
type Targets interface {
	// Target returns the incoming migration uid, false when this node has
	// none (or no longer has it).
	Target(uid string) (Target, bool)
}

// Server is the target end of the channel.
type Server struct {
	tls     *tls.Config
	targets Targets
	log     *slog.Logger

	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

// NewServer returns a server taking its certificate from certs, trusting
// client certificates that chain to roots, and piping the migrations of
// targets.
func NewServer(certs Certificates, roots certrotation.Roots, targets Targets, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{tls: serverTLS(certs, roots), targets: targets, log: log, conns: map[net.Conn]struct{}{}}
}

// Serve accepts connections on l until ctx ends; it closes l and every
// connection it still pipes when it returns.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	go func() {
		<-ctx.Done()
		l.Close()
	}()
	var wg sync.WaitGroup
	defer func() {
		s.closeAll()
		wg.Wait()
	}()
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return fmt.Errorf("migration channel: accept: %w", err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.serveConn(ctx, c)
		}()
	}
}

func (s *Server) track(c net.Conn, on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if on {
		s.conns[c] = struct{}{}
	} else {
		delete(s.conns, c)
	}
}

func (s *Server) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		c.Close()
	}
}

// serveConn authenticates one connection, reads its header, authorizes it
// and pipes it to the target QEMU.
func (s *Server) serveConn(ctx context.Context, raw net.Conn) {
	s.track(raw, true)
	defer s.track(raw, false)
	defer raw.Close()
	tc := tls.Server(raw, s.tls)
	_ = tc.SetDeadline(time.Now().Add(handshakeTimeout))
	log := s.log.With("remote", raw.RemoteAddr().String())
	if err := tc.HandshakeContext(ctx); err != nil {
		log.Warn("migration channel: refused a connection", "err", err)
		return
	}
	h, err := ReadHeader(tc)
	if err != nil {
		log.Warn("migration channel: refused a connection", "err", err)
		return
	}
	tgt, err := s.authorize(tc.ConnectionState(), h)
	if err != nil {
		log.Warn("migration channel: refused a connection", "migration", h.MigrationUID, "stream", h.Stream, "err", err)
		return
	}
	_ = tc.SetDeadline(time.Time{})
	dctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
	qc, err := unixsock.Dial(dctx, tgt.socket(h.Kind))
	cancel()
	if err != nil {
		log.Warn("migration channel: target QEMU socket", "migration", h.MigrationUID, "err", err)
		return
	}
	s.track(qc, true)
	defer s.track(qc, false)
	log.Info("migration channel: stream accepted", "migration", h.MigrationUID, "kind", h.Kind, "stream", h.Stream, "source", tgt.SourceNode)
	n := pipe(tc, qc)
	log.Info("migration channel: stream ended", "migration", h.MigrationUID, "stream", h.Stream, "bytes", n)
}

// authorize serves only a migration this node prepared, and only to the
// agent of that migration's source node.
func (s *Server) authorize(cs tls.ConnectionState, h Header) (Target, error) {
	tgt, ok := s.targets.Target(h.MigrationUID)
	if !ok {
		return Target{}, fmt.Errorf("%w: no incoming migration %s on this node", ErrUnauthorizedPeer, h.MigrationUID)
	}
	if tgt.socket(h.Kind) == "" {
		return Target{}, fmt.Errorf("%w: migration %s moves no disks", ErrUnauthorizedPeer, h.MigrationUID)
	}
	if len(cs.PeerCertificates) == 0 {
		return Target{}, fmt.Errorf("%w: no certificate", ErrUnauthorizedPeer)
	}
	got, want := cs.PeerCertificates[0].Subject.CommonName, certrotation.AgentName(tgt.SourceNode)
	if got != want {
		return Target{}, fmt.Errorf("%w: subject CN %q, want %q", ErrUnauthorizedPeer, got, want)
	}
	return tgt, nil
}

// closeWriter is a connection that can half-close (TCP, unix, TLS).
type closeWriter interface{ CloseWrite() error }

// pipe copies both ways until both directions end; it returns the bytes
// copied from a to b. Each direction half-closes its destination when its
// source ends, so QEMU sees the end of the stream.
func pipe(a, b net.Conn) int64 {
	var wg sync.WaitGroup
	var n int64
	cp := func(dst, src net.Conn, count *int64) {
		defer wg.Done()
		c, err := io.Copy(dst, src)
		if count != nil {
			*count = c
		}
		if cw, ok := dst.(closeWriter); ok && err == nil {
			_ = cw.CloseWrite()
			return
		}
		// An error on one side ends both: QEMU must see the failure.
		a.Close()
		b.Close()
	}
	wg.Add(2)
	go cp(b, a, &n)
	go cp(a, b, nil)
	wg.Wait()
	return n
}
