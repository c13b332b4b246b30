package qmp

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"
)

// maxMessage bounds one protocol message. QMP and QGA messages are single
// lines; a peer that sends more without a newline is broken (or hostile: the
// guest agent is guest-controlled) and the connection is dropped.
const maxMessage = 16 << 20

// request is one command as sent on the wire.
type request struct {
	Execute   string `json:"execute"`
	Arguments any    `json:"arguments,omitempty"`
	ID        any    `json:"id,omitempty"`
}

// message is any message QEMU or qemu-ga sends: greeting, reply or event.
type message struct {
	QMP       *Greeting       `json:"QMP"`
	Event     string          `json:"event"`
	Data      json.RawMessage `json:"data"`
	Timestamp *struct {
		Seconds      int64 `json:"seconds"`
		Microseconds int64 `json:"microseconds"`
	} `json:"timestamp"`
	ID     json.RawMessage `json:"id"`
	Return json.RawMessage `json:"return"`
	Error  *Error          `json:"error"`
}

func (m *message) isReply() bool { return m.Return != nil || m.Error != nil }

// id returns the numeric id of a reply, or false if it has none we sent.
func (m *message) id() (uint64, bool) {
	if len(m.ID) == 0 {
		return 0, false
	}
	n, err := strconv.ParseUint(string(m.ID), 10, 64)
	return n, err == nil
}

func (m *message) time() time.Time {
	if m.Timestamp == nil {
		return time.Time{}
	}
	return time.Unix(m.Timestamp.Seconds, m.Timestamp.Microseconds*1000)
}

// result decodes a reply into out (which may be nil).
func (m *message) result(out any) error {
	if m.Error != nil {
		return m.Error
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(m.Return, out); err != nil {
		return fmt.Errorf("%w: decode reply: %w", ErrProtocol, err)
	}
	return nil
}

// lineReader splits a stream into newline-terminated lines of at most
// maxMessage bytes.
type lineReader struct {
	r *bufio.Reader
}

func newLineReader(r io.Reader) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, 64<<10)}
}

// next returns the next line without its line ending. The slice is only
// valid until the following call.
func (lr *lineReader) next() ([]byte, error) {
	var buf []byte
	for {
		chunk, err := lr.r.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			if len(buf)+len(chunk) > maxMessage {
				return nil, fmt.Errorf("%w: message longer than %d bytes", ErrProtocol, maxMessage)
			}
			buf = append(buf, chunk...)
			continue
		}
		if err != nil {
			return nil, err
		}
		if buf != nil {
			chunk = append(buf, chunk...)
		}
		return bytes.TrimRight(chunk, "\r\n"), nil
	}
}
