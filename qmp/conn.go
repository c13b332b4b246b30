package qmp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Greeting is what QEMU announces when a client connects.
type Greeting struct {
	Version struct {
		QEMU struct {
			Major int `json:"major"`
			Minor int `json:"minor"`
			Micro int `json:"micro"`
		} `json:"qemu"`
		Package string `json:"package"`
	} `json:"version"`
	Capabilities []string `json:"capabilities"`
}

// Conn is a QMP connection to one QEMU process. It is safe for concurrent
// use: commands are correlated with their replies by id, so any number of
// callers may have commands in flight.
type Conn struct {
	nc       net.Conn
	name     string // for error messages: the socket path
	greeting Greeting

	wsem   chan struct{} // held while writing one request
	nextID atomic.Uint64

	mu      sync.Mutex
	pending map[uint64]chan *message
	subs    map[*Subscription]struct{}
	err     error // why the connection ended; set once, before done is closed

	closedByUs bool // Close (not the peer) ended the connection

	done      chan struct{}
	closeOnce sync.Once
}

// Dial connects to the QMP unix socket at path, reads QEMU's greeting and
// negotiates capabilities (the request goes out with the connection). If
// the greeting does not arrive (or is not one) before ctx ends, Dial fails
// with an error wrapping ErrGreeting (and the context's error, if that is
// why).
func Dial(ctx context.Context, path string) (*Conn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("qmp dial %q: %w", path, err)
	}
	return NewConn(ctx, nc, path)
}

// NewConn runs the QMP handshake on an established connection (name is used
// in error messages) and returns the ready Conn. On failure nc is closed.
func NewConn(ctx context.Context, nc net.Conn, name string) (*Conn, error) {
	c := &Conn{
		nc:      nc,
		name:    name,
		wsem:    make(chan struct{}, 1),
		pending: make(map[uint64]chan *message),
		subs:    make(map[*Subscription]struct{}),
		done:    make(chan struct{}),
	}
	greeted := make(chan *Greeting, 1)
	go c.readLoop(greeted)
	// The capabilities request is sent at once, not after the greeting
	// came: QEMU writes its greeting when it accepts and reads requests
	// only after that, so the order on the wire is the protocol's, and the
	// handshake waits for QEMU once instead of twice. A QEMU starved of
	// CPU (a restarted agent attaching to a hundred at once) answers each
	// wait late.
	negotiated := make(chan error, 1)
	go func() { negotiated <- c.Execute(ctx, "qmp_capabilities", nil, nil) }()

	select {
	case g := <-greeted:
		if g == nil {
			c.Close()
			return nil, fmt.Errorf("qmp %q: %w: first message is not a greeting", name, ErrGreeting)
		}
		c.greeting = *g
	case <-c.done:
		return nil, fmt.Errorf("qmp %q: %w: %w", name, ErrGreeting, c.closeErr())
	case <-ctx.Done():
		c.Close()
		return nil, fmt.Errorf("qmp %q: %w: %w", name, ErrGreeting, ctx.Err())
	}
	if err := <-negotiated; err != nil {
		c.Close()
		return nil, fmt.Errorf("%w: %w", ErrGreeting, err)
	}
	return c, nil
}

// Greeting returns what QEMU announced on connect (its version).
func (c *Conn) Greeting() Greeting { return c.greeting }

// Done is closed when the connection has ended (Close, or QEMU went away).
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err returns nil while the connection is up, afterwards an error wrapping
// ErrClosed that says why it ended.
func (c *Conn) Err() error {
	if err := c.closeErr(); err != nil {
		return fmt.Errorf("qmp %q: %w", c.name, err)
	}
	return nil
}

// closeErr is why the connection ended (nil while it is up).
func (c *Conn) closeErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close closes the connection. Every pending and later call returns an
// error wrapping ErrClosed; event subscriptions are closed. Close is
// idempotent and never blocks on QEMU.
func (c *Conn) Close() error {
	c.shutdown(nil)
	return nil
}

// shutdown ends the connection once; cause nil means a local Close.
func (c *Conn) shutdown(cause error) {
	c.closeOnce.Do(func() {
		err := ErrClosed
		if cause != nil {
			err = fmt.Errorf("%w: %w", ErrClosed, cause)
		}
		c.nc.Close()
		c.mu.Lock()
		c.err = err
		c.closedByUs = cause == nil
		for id, ch := range c.pending {
			delete(c.pending, id)
			close(ch)
		}
		for s := range c.subs {
			delete(c.subs, s)
			close(s.ch)
		}
		c.mu.Unlock()
		close(c.done)
	})
}

// Execute runs command with args (nil for none; anything encoding/json
// marshals to an object) and decodes the reply into result (nil to discard).
// An error reply is returned as *Error. If ctx ends first, Execute returns
// ctx.Err() at once; QEMU may still carry the command out, and its late
// reply is discarded.
func (c *Conn) Execute(ctx context.Context, command string, args, result any) error {
	fail := func(err error) error { return fmt.Errorf("qmp %q %s: %w", c.name, command, err) }
	id := c.nextID.Add(1)
	b, err := json.Marshal(request{Execute: command, Arguments: args, ID: id})
	if err != nil {
		return fail(fmt.Errorf("encode arguments: %w", err))
	}
	b = append(b, '\n')

	ch := make(chan *message, 1)
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return fail(err)
	}
	c.pending[id] = ch
	c.mu.Unlock()
	defer c.forget(id)

	if err := c.write(ctx, b); err != nil {
		return fail(err)
	}
	select {
	case m, ok := <-ch:
		if !ok {
			return fail(c.closeErr())
		}
		if err := m.result(result); err != nil {
			return fail(err)
		}
		return nil
	case <-ctx.Done():
		return fail(ctx.Err())
	}
}

func (c *Conn) forget(id uint64) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

// write sends one request. Writers take turns; a write that cannot finish
// before ctx ends is abandoned, and if it left half a request on the wire
// the connection is closed (the stream can no longer be parsed by QEMU).
func (c *Conn) write(ctx context.Context, b []byte) error {
	select {
	case c.wsem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	case <-c.done:
		return c.closeErr()
	}
	defer func() { <-c.wsem }()

	deadline, _ := ctx.Deadline()
	if err := c.nc.SetWriteDeadline(deadline); err != nil {
		return c.closedOr(err)
	}
	stop := context.AfterFunc(ctx, func() {
		c.nc.SetWriteDeadline(time.Unix(1, 0))
	})
	n, err := c.nc.Write(b)
	stop()
	if err == nil {
		return nil
	}
	if n > 0 {
		c.shutdown(fmt.Errorf("partial write: %w", err))
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return c.closedOr(err)
}

// closedOr prefers the connection's end reason over a raw I/O error.
func (c *Conn) closedOr(err error) error {
	if cerr := c.closeErr(); cerr != nil {
		return cerr
	}
	if errors.Is(err, net.ErrClosed) {
		return ErrClosed
	}
	return err
}

// readLoop owns the read side: it hands the first message to greeted (nil if
// it is not a greeting), then routes replies to their callers and events to
// subscribers until the connection ends.
func (c *Conn) readLoop(greeted chan<- *Greeting) {
	lr := newLineReader(c.nc)
	first := true
	for {
		line, err := lr.next()
		if err != nil {
			c.shutdown(err)
			return
		}
		if len(line) == 0 {
			continue
		}
		m := new(message)
		if err := json.Unmarshal(line, m); err != nil {
			if first {
				greeted <- nil
				return
			}
			// QEMU only sends valid JSON; skip rather than kill the session.
			continue
		}
		if first {
			first = false
			greeted <- m.QMP
			if m.QMP == nil {
				return
			}
			continue
		}
		switch {
		case m.Event != "":
			c.publish(Event{Name: m.Event, Data: m.Data, Time: m.time()})
		case m.isReply():
			c.deliver(m)
		}
	}
}

func (c *Conn) deliver(m *message) {
	id, ok := m.id()
	if !ok {
		return // a reply to nothing we sent (e.g. a parse error report)
	}
	c.mu.Lock()
	ch, ok := c.pending[id]
	delete(c.pending, id)
	c.mu.Unlock()
	if ok {
		ch <- m // buffered; each id is delivered at most once
	}
}
