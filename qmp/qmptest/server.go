package qmptest

import (
	"bufio"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/nodevirt/nodevirt/qmp"
)

// Sentinel handler results.
var (
	// ErrNoReply makes the server swallow the command: it never answers.
	ErrNoReply = errors.New("qmptest: no reply")
	// ErrHangup makes the server close the client's connection instead of
	// answering.
	ErrHangup = errors.New("qmptest: hang up")
)

// DefaultGreeting is the QMP greeting a Server sends unless told otherwise.
const DefaultGreeting = `{"QMP": {"version": {"qemu": {"micro": 22, "minor": 2, "major": 7}, "package": "qmptest"}, "capabilities": ["oob"]}}`

// Request is one command the server received.
type Request struct {
	Command   string          `json:"execute"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	ID        json.RawMessage `json:"id,omitempty"`
}

// Handler answers a command: a result (marshalled as "return"), or an error:
// a *qmp.Error is sent as an error reply; ErrNoReply and ErrHangup act as
// documented; any other error is sent as a GenericError.
type Handler func(Request) (any, error)

// Server is a fake QMP or guest agent server.
type Server struct {
	t     testing.TB
	agent bool
	ln    net.Listener
	path  string

	mu       sync.Mutex
	handlers map[string]Handler
	greeting string
	// greetLate holds the greeting until a client's first request came.
	greetLate bool
	stale     []byte
	conns     map[*serverConn]struct{}
	received  []Request
	wg        sync.WaitGroup
}

type serverConn struct {
	nc net.Conn
	wu sync.Mutex // serialises writes
}

func (c *serverConn) send(b []byte) error {
	c.wu.Lock()
	defer c.wu.Unlock()
	_, err := c.nc.Write(b)
	return err
}

// NewServer starts a fake QMP server. It answers qmp_capabilities with {}.
func NewServer(t testing.TB) *Server {
	s := newServer(t, false)
	s.greeting = DefaultGreeting
	s.Handle("qmp_capabilities", func(Request) (any, error) { return struct{}{}, nil })
	return s
}

// NewAgentServer starts a fake guest agent. It answers guest-sync-delimited,
// guest-sync and guest-ping.
func NewAgentServer(t testing.TB) *Server {
	s := newServer(t, true)
	echoID := func(r Request) (any, error) {
		var a struct {
			ID json.RawMessage `json:"id"`
		}
		if err := json.Unmarshal(r.Arguments, &a); err != nil {
			return nil, &qmp.Error{Class: qmp.ClassGenericError, Desc: "bad id"}
		}
		return a.ID, nil
	}
	s.Handle("guest-sync-delimited", echoID)
	s.Handle("guest-sync", echoID)
	s.Handle("guest-ping", func(Request) (any, error) { return struct{}{}, nil })
	return s
}

func newServer(t testing.TB, agent bool) *Server {
	t.Helper()
	dir, err := os.MkdirTemp("", "qmptest")
	if err != nil {
		t.Fatalf("qmptest: %v", err)
	}
	path := filepath.Join(dir, "sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		os.RemoveAll(dir)
		t.Fatalf("qmptest: listen: %v", err)
	}
	s := &Server{
		t:        t,
		agent:    agent,
		ln:       ln,
		path:     path,
		handlers: make(map[string]Handler),
		conns:    make(map[*serverConn]struct{}),
	}
	s.wg.Add(1)
	go s.accept()
	t.Cleanup(func() {
		s.Close()
		s.wg.Wait()
		os.RemoveAll(dir)
	})
	return s
}

// Path is the unix socket to dial.
func (s *Server) Path() string { return s.path }

// Handle sets the handler for command (replacing any earlier one).
// Commands without a handler get a CommandNotFound error.
func (s *Server) Handle(command string, h Handler) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handlers[command] = h
}

// SetGreeting replaces the raw greeting line sent to new QMP clients; ""
// sends none.
func (s *Server) SetGreeting(line string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.greeting = line
}

// GreetAfterFirstRequest makes a QMP server hold its greeting until the
// client's first request has arrived, then send it before that request's
// reply: a client that waits for the greeting before it sends never gets
// one.
func (s *Server) GreetAfterFirstRequest() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.greetLate = true
}

// SetStale makes an agent server write b before every guest-sync-delimited
// reply, like leftovers of an earlier, interrupted exchange.
func (s *Server) SetStale(b []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stale = append([]byte(nil), b...)
}

// Received returns the commands received so far, in arrival order.
func (s *Server) Received() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.received...)
}

// Emit sends an event to every connected client. data may be nil.
func (s *Server) Emit(name string, data any) {
	ev := map[string]any{
		"event":     name,
		"timestamp": map[string]int64{"seconds": 1700000000, "microseconds": 42},
	}
	if data != nil {
		ev["data"] = data
	}
	b, err := json.Marshal(ev)
	if err != nil {
		s.t.Errorf("qmptest: encode event %s: %v", name, err)
		return
	}
	b = append(b, '\r', '\n')
	s.mu.Lock()
	conns := make([]*serverConn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.send(b)
	}
}

// Close stops listening and drops every client connection.
func (s *Server) Close() {
	s.ln.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		c.nc.Close()
	}
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			return
		}
		c := &serverConn{nc: nc}
		s.mu.Lock()
		s.conns[c] = struct{}{}
		greeting, late := s.greeting, s.greetLate
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer func() {
				nc.Close()
				s.mu.Lock()
				delete(s.conns, c)
				s.mu.Unlock()
			}()
			if s.agent {
				greeting = ""
			}
			s.serve(c, greeting, late)
		}()
	}
}

// serve greets (unless greeting is empty) and reads requests until the
// client goes away; a late greeting (GreetAfterFirstRequest) goes out once
// the first request has arrived, before its reply.
func (s *Server) serve(c *serverConn, greeting string, late bool) {
	greet := func() bool {
		g := greeting
		greeting = ""
		return g == "" || c.send([]byte(g+"\r\n")) == nil
	}
	if !late && !greet() {
		return
	}
	var r *bufio.Reader
	if s.agent {
		r = bufio.NewReader(dropDelimiters{c.nc})
	} else {
		r = bufio.NewReader(c.nc)
	}
	dec := json.NewDecoder(r)
	var inflight sync.WaitGroup
	defer inflight.Wait()
	for {
		var req Request
		if err := dec.Decode(&req); err != nil {
			return
		}
		s.mu.Lock()
		s.received = append(s.received, req)
		h := s.handlers[req.Command]
		s.mu.Unlock()
		if !greet() {
			return
		}
		if s.agent {
			if !s.answer(c, req, h) {
				return
			}
			continue
		}
		inflight.Add(1)
		go func() {
			defer inflight.Done()
			s.answer(c, req, h)
		}()
	}
}

// answer runs the handler and sends its reply; false means hang up.
func (s *Server) answer(c *serverConn, req Request, h Handler) bool {
	var (
		result any
		err    error
	)
	if h == nil {
		err = &qmp.Error{Class: qmp.ClassCommandNotFound, Desc: "The command " + req.Command + " has not been found"}
	} else {
		result, err = h(req)
	}
	switch {
	case errors.Is(err, ErrNoReply):
		return true
	case errors.Is(err, ErrHangup):
		c.nc.Close()
		return false
	}
	reply := map[string]any{}
	if len(req.ID) > 0 {
		reply["id"] = req.ID
	}
	var qe *qmp.Error
	switch {
	case errors.As(err, &qe):
		reply["error"] = qe
	case err != nil:
		reply["error"] = &qmp.Error{Class: qmp.ClassGenericError, Desc: err.Error()}
	case result == nil:
		reply["return"] = struct{}{}
	default:
		reply["return"] = result
	}
	b, merr := json.Marshal(reply)
	if merr != nil {
		s.t.Errorf("qmptest: encode reply to %s: %v", req.Command, merr)
		return false
	}
	var out []byte
	if s.agent && req.Command == "guest-sync-delimited" {
		s.mu.Lock()
		out = append(out, s.stale...)
		s.mu.Unlock()
		out = append(out, 0xFF)
	}
	out = append(out, b...)
	out = append(out, '\n')
	return c.send(out) == nil
}

// dropDelimiters removes 0xFF bytes, which qemu-ga treats as a reset.
type dropDelimiters struct{ r net.Conn }

func (d dropDelimiters) Read(p []byte) (int, error) {
	for {
		n, err := d.r.Read(p)
		k := 0
		for _, b := range p[:n] {
			if b != 0xFF {
				p[k] = b
				k++
			}
		}
		if k > 0 || err != nil {
			return k, err
		}
	}
}
