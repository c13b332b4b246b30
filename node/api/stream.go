package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/gorilla/websocket"

	"github.com/nodevirt/nodevirt/node/unixsock"
	"github.com/nodevirt/nodevirt/store"
)

// Subprotocol is the websocket subprotocol of console and VNC streams
// (KubeVirt's): raw bytes in binary messages.
const Subprotocol = "plain.kubevirt.io"

// stream is one open console or VNC session.
type stream struct {
	cancel context.CancelFunc
	done   chan struct{}
}

var upgrader = websocket.Upgrader{
	Subprotocols: []string{Subprotocol},
	// Callers are authenticated by the transport (root-only socket, mTLS);
	// there is no browser session to protect.
	CheckOrigin: func(*http.Request) bool { return true },
}

// console bridges a websocket to QEMU's serial console.
func (s *Server) console(w http.ResponseWriter, r *http.Request, uid string) {
	s.bridge(w, r, uid, "console", func(rec store.Record) string { return rec.Sockets.Serial })
}

// vnc bridges a websocket to QEMU's VNC server.
func (s *Server) vnc(w http.ResponseWriter, r *http.Request, uid string) {
	s.bridge(w, r, uid, "vnc", func(rec store.Record) string { return rec.Sockets.VNC })
}

// bridge replaces any open session of the same kind for the VMI, dials the
// socket and copies bytes both ways until either side closes.
func (s *Server) bridge(w http.ResponseWriter, r *http.Request, uid, kind string, socket func(store.Record) string) {
	rec, err := s.deps.Records.Get(r.Context(), uid)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	path := socket(rec)
	if path == "" && kind == "vnc" {
		s.fail(w, r, fmt.Errorf("VMI %s: %w", uid, ErrNoGraphics))
		return
	}
	if path == "" {
		s.fail(w, r, fmt.Errorf("VMI %s has no %s socket: %w", uid, kind, ErrNotRunning))
		return
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	defer cancel()
	key := kind + "/" + uid
	done := s.takeOver(key, cancel)
	defer s.release(key, done)

	dctx, dcancel := context.WithTimeout(ctx, s.cfg.CallTimeout)
	nc, err := unixsock.Dial(dctx, path)
	dcancel()
	if err != nil {
		s.fail(w, r, fmt.Errorf("VMI %s %s: %w: %w", uid, kind, ErrNotRunning, err))
		return
	}
	defer nc.Close()
	ws, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return // Upgrade answered the client
	}
	defer ws.Close()
	s.log.Info("stream opened", "kind", kind, "uid", uid)
	err = pump(ctx, ws, nc, s.cfg.PingPeriod, false)
	s.log.Info("stream closed", "kind", kind, "uid", uid, "err", err)
}

// takeOver registers a new session under key after closing the previous
// one and waiting for it to let go of the socket.
func (s *Server) takeOver(key string, cancel context.CancelFunc) chan struct{} {
	st := &stream{cancel: cancel, done: make(chan struct{})}
	s.mu.Lock()
	old := s.streams[key]
	s.streams[key] = st
	s.mu.Unlock()
	if old != nil {
		old.cancel()
		<-old.done
	}
	return st.done
}

// release unregisters the session that owns done, if still registered.
func (s *Server) release(key string, done chan struct{}) {
	s.mu.Lock()
	if st := s.streams[key]; st != nil && st.done == done {
		delete(s.streams, key)
	}
	s.mu.Unlock()
	close(done)
}

// pump copies nc → ws and ws → nc, pinging ws every period, until one side
// ends or ctx is cancelled (a newer session took over). With packets, nc
// is a datagram socket: each message is written as one datagram.
func pump(ctx context.Context, ws *websocket.Conn, nc net.Conn, period time.Duration, packets bool) error {
	stop := context.AfterFunc(ctx, func() {
		_ = ws.WriteControl(websocket.CloseMessage,
			websocket.FormatCloseMessage(websocket.CloseNormalClosure, "replaced by a new session"),
			time.Now().Add(time.Second))
		ws.Close()
		nc.Close()
	})
	defer stop()
	errc := make(chan error, 2)
	go func() { errc <- copyToWS(ws, nc) }()
	go func() { errc <- copyFromWS(nc, ws, period, packets) }()
	go pinger(ctx, ws, period, errc)
	err := <-errc
	ws.Close()
	nc.Close()
	return err
}

// maxDatagram is the largest UDP payload.
const maxDatagram = 65507

func copyToWS(ws *websocket.Conn, nc net.Conn) error {
	buf := make([]byte, 64<<10) // a whole datagram fits
	for {
		n, err := nc.Read(buf)
		if n > 0 {
			if werr := ws.WriteMessage(websocket.BinaryMessage, buf[:n]); werr != nil {
				return werr
			}
		}
		if err != nil {
			return err
		}
	}
}

func copyFromWS(nc net.Conn, ws *websocket.Conn, period time.Duration, packets bool) error {
	extend := func(string) error { return ws.SetReadDeadline(time.Now().Add(2 * period)) }
	_ = extend("")
	ws.SetPongHandler(extend)
	for {
		_, r, err := ws.NextReader()
		if err != nil {
			var ce *websocket.CloseError
			if errors.As(err, &ce) {
				return nil
			}
			return err
		}
		_ = extend("")
		if packets {
			b, err := io.ReadAll(io.LimitReader(r, maxDatagram+1))
			if err != nil {
				return err
			}
			if len(b) > maxDatagram {
				return fmt.Errorf("message of more than %d bytes for a datagram socket", maxDatagram)
			}
			if _, err := nc.Write(b); err != nil {
				return err
			}
			continue
		}
		if _, err := io.Copy(nc, r); err != nil {
			return err
		}
	}
}

// pinger sends a ping every period; a failed ping ends the stream.
func pinger(ctx context.Context, ws *websocket.Conn, period time.Duration, errc chan<- error) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(period)); err != nil {
				select {
				case errc <- err:
				default:
				}
				return
			}
		}
	}
}
