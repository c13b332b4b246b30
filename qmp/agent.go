package qmp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"time"
)

// delimiter is the byte qemu-ga sends before a guest-sync-delimited reply
// and treats as "reset your parser" when it receives it. It never occurs in
// UTF-8 JSON.
const delimiter = 0xFF

// Agent is a client of the QEMU guest agent (qemu-ga) reached through the
// host end of its virtio-serial chardev socket. qemu-ga runs one command at
// a time and has no ids, greeting or events, so an Agent sends one command
// at a time and re-synchronises (guest-sync-delimited) before the first
// command and after anything that may have left a stale reply in the
// stream: a cancelled or timed-out call, a garbled reply, a guest reboot.
// It is safe for concurrent use; callers take turns.
type Agent struct {
	nc   net.Conn
	name string

	sem      chan struct{} // held by the caller whose command is in flight
	needSync bool          // guarded by sem

	items chan agentItem // from readLoop

	mu        sync.Mutex
	err       error
	done      chan struct{}
	closeOnce sync.Once
}

// agentItem is one thing read from the stream: a delimiter, a message, or a
// line that is not JSON.
type agentItem struct {
	delim bool
	msg   *message
}

// DialAgent connects to the guest agent's chardev socket at path. It does
// not talk to the guest: the agent may not be running yet. The first
// command (or Sync) synchronises with it.
func DialAgent(ctx context.Context, path string) (*Agent, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("guest agent dial %q: %w", path, err)
	}
	return NewAgent(nc, path), nil
}

// NewAgent returns an Agent on an established connection (name is used in
// error messages).
func NewAgent(nc net.Conn, name string) *Agent {
	a := &Agent{
		nc:       nc,
		name:     name,
		sem:      make(chan struct{}, 1),
		needSync: true,
		items:    make(chan agentItem, 64),
		done:     make(chan struct{}),
	}
	go a.readLoop()
	return a
}

// Done is closed when the connection has ended.
func (a *Agent) Done() <-chan struct{} { return a.done }

// Err returns nil while connected, afterwards an error wrapping ErrClosed.
func (a *Agent) Err() error {
	if err := a.closeErr(); err != nil {
		return fmt.Errorf("guest agent %q: %w", a.name, err)
	}
	return nil
}

// closeErr is why the connection ended (nil while it is up).
func (a *Agent) closeErr() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.err
}

// Close closes the connection; pending and later calls return ErrClosed.
func (a *Agent) Close() error {
	a.shutdown(nil)
	return nil
}

func (a *Agent) shutdown(cause error) {
	a.closeOnce.Do(func() {
		err := ErrClosed
		if cause != nil {
			err = fmt.Errorf("%w: %w", ErrClosed, cause)
		}
		a.nc.Close()
		a.mu.Lock()
		a.err = err
		a.mu.Unlock()
		close(a.done)
	})
}

// Sync synchronises with the guest agent now: it discards anything stale
// in the stream and waits until qemu-ga answers. Commands do this
// themselves when needed; Sync is for checking that the agent is alive.
func (a *Agent) Sync(ctx context.Context) error {
	if err := a.acquire(ctx); err != nil {
		return fmt.Errorf("guest agent %q: %w", a.name, err)
	}
	defer a.release()
	if err := a.sync(ctx); err != nil {
		return fmt.Errorf("guest agent %q: %w", a.name, err)
	}
	return nil
}

// Execute runs a guest agent command and decodes its reply into result
// (nil to discard). It synchronises first if needed. If ctx ends first it
// returns ctx.Err() and the next call re-synchronises.
func (a *Agent) Execute(ctx context.Context, command string, args, result any) error {
	if err := a.acquire(ctx); err != nil {
		return fmt.Errorf("guest agent %q %s: %w", a.name, command, err)
	}
	defer a.release()
	if err := a.sync(ctx); err != nil {
		return fmt.Errorf("guest agent %q %s: %w", a.name, command, err)
	}
	if err := a.send(ctx, command, args, false); err != nil {
		return fmt.Errorf("guest agent %q %s: %w", a.name, command, err)
	}
	m, err := a.reply(ctx, func(*message) bool { return true })
	if err != nil {
		return fmt.Errorf("guest agent %q %s: %w", a.name, command, err)
	}
	if err := m.result(result); err != nil {
		if !errors.As(err, new(*Error)) {
			a.needSync = true
		}
		return fmt.Errorf("guest agent %q %s: %w", a.name, command, err)
	}
	return nil
}

// executeNoReply sends a command qemu-ga does not answer on success
// (guest-shutdown). A failure reply, if any, is discarded by the next sync.
func (a *Agent) executeNoReply(ctx context.Context, command string, args any) error {
	if err := a.acquire(ctx); err != nil {
		return fmt.Errorf("guest agent %q %s: %w", a.name, command, err)
	}
	defer a.release()
	if err := a.sync(ctx); err != nil {
		return fmt.Errorf("guest agent %q %s: %w", a.name, command, err)
	}
	a.needSync = true
	if err := a.send(ctx, command, args, false); err != nil {
		return fmt.Errorf("guest agent %q %s: %w", a.name, command, err)
	}
	return nil
}

func (a *Agent) acquire(ctx context.Context) error {
	select {
	case a.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-a.done:
		return a.closeErr()
	}
}

func (a *Agent) release() { <-a.sem }

// sync runs guest-sync-delimited with a fresh random id when needed and
// skips everything up to its reply.
func (a *Agent) sync(ctx context.Context) error {
	if !a.needSync {
		return nil
	}
	// Whatever is queued now is stale.
	for drained := false; !drained; {
		select {
		case <-a.items:
		default:
			drained = true
		}
	}
	id := rand.Int64N(1 << 53) // exactly representable in qemu-ga's JSON numbers
	if err := a.send(ctx, "guest-sync-delimited", map[string]int64{"id": id}, true); err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	_, err := a.reply(ctx, func(m *message) bool {
		var got int64
		return m.Error == nil && json.Unmarshal(m.Return, &got) == nil && got == id
	})
	if err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	a.needSync = false
	return nil
}

// send writes one command, preceded by the delimiter byte if delim (which
// makes qemu-ga drop any partial input). The caller holds sem.
func (a *Agent) send(ctx context.Context, command string, args any, delim bool) error {
	b, err := json.Marshal(request{Execute: command, Arguments: args})
	if err != nil {
		return fmt.Errorf("encode arguments: %w", err)
	}
	if delim {
		b = append([]byte{delimiter}, b...)
	}
	b = append(b, '\n')

	deadline, _ := ctx.Deadline()
	if err := a.nc.SetWriteDeadline(deadline); err != nil {
		return a.closedOr(err)
	}
	stop := context.AfterFunc(ctx, func() {
		a.nc.SetWriteDeadline(time.Unix(1, 0))
	})
	n, err := a.nc.Write(b)
	stop()
	if err != nil {
		if n > 0 {
			a.needSync = true // the delimiter of the next sync resets qemu-ga's parser
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return a.closedOr(err)
	}
	return nil
}

// reply waits for the first message accepted by want. A context that ends
// first leaves the stream out of step, so the next call re-synchronises.
func (a *Agent) reply(ctx context.Context, want func(*message) bool) (*message, error) {
	for {
		select {
		case it := <-a.items:
			if it.msg != nil && it.msg.isReply() && want(it.msg) {
				return it.msg, nil
			}
		case <-ctx.Done():
			a.needSync = true
			return nil, ctx.Err()
		case <-a.done:
			return nil, a.closeErr()
		}
	}
}

func (a *Agent) closedOr(err error) error {
	if cerr := a.closeErr(); cerr != nil {
		return cerr
	}
	if errors.Is(err, net.ErrClosed) {
		return ErrClosed
	}
	return err
}

// readLoop turns the byte stream into items until the connection ends.
func (a *Agent) readLoop() {
	lr := newLineReader(a.nc)
	for {
		line, err := lr.next()
		if err != nil {
			a.shutdown(err)
			return
		}
		if i := bytes.LastIndexByte(line, delimiter); i >= 0 {
			if !a.put(agentItem{delim: true}) {
				return
			}
			line = line[i+1:]
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		m := new(message)
		if json.Unmarshal(line, m) != nil {
			m = nil // garbage (e.g. the tail of a reply cut by a guest reboot)
		}
		if !a.put(agentItem{msg: m}) {
			return
		}
	}
}

func (a *Agent) put(it agentItem) bool {
	select {
	case a.items <- it:
		return true
	case <-a.done:
		return false
	}
}
