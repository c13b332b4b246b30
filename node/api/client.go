package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"

	"github.com/gorilla/websocket"

	"github.com/nodevirt/nodevirt/store"
)

// Client talks to the debug routes on the agent's unix socket (nodectl).
type Client struct {
	socket string
	http   *http.Client
}

// NewClient returns a client of the agent listening at the unix socket.
func NewClient(socket string) *Client {
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	}}
	return &Client{socket: socket, http: &http.Client{Transport: tr}}
}

// Error is an error answer of the API.
type Error struct {
	Code    int
	Message string
}

func (e *Error) Error() string { return fmt.Sprintf("node API: %d: %s", e.Code, e.Message) }

// Domains lists every record.
func (c *Client) Domains(ctx context.Context) ([]store.Record, error) {
	var out []store.Record
	return out, c.do(ctx, http.MethodGet, RouteDomains, "", nil, &out)
}

// Domain returns the record of vmi (ns/name or UID).
func (c *Client) Domain(ctx context.Context, vmi string) (store.Record, error) {
	var out store.Record
	return out, c.do(ctx, http.MethodGet, RouteDomain, vmi, nil, &out)
}

// Timeline returns the timeline of vmi.
func (c *Client) Timeline(ctx context.Context, vmi string) ([]store.Event, error) {
	var out []store.Event
	return out, c.do(ctx, http.MethodGet, RouteTimeline, vmi, nil, &out)
}

// Pause pauses vmi.
func (c *Client) Pause(ctx context.Context, vmi string) error {
	return c.do(ctx, http.MethodPut, RoutePause, vmi, nil, nil)
}

// Unpause unpauses vmi.
func (c *Client) Unpause(ctx context.Context, vmi string) error {
	return c.do(ctx, http.MethodPut, RouteUnpause, vmi, nil, nil)
}

// QMP runs one QMP command on vmi's QEMU and returns its "return" value.
func (c *Client) QMP(ctx context.Context, vmi string, cmd Command) (json.RawMessage, error) {
	return c.passthrough(ctx, RouteQMP, vmi, cmd)
}

// Agent runs one guest agent command and returns its "return" value.
func (c *Client) Agent(ctx context.Context, vmi string, cmd Command) (json.RawMessage, error) {
	return c.passthrough(ctx, RouteAgent, vmi, cmd)
}

func (c *Client) passthrough(ctx context.Context, route, vmi string, cmd Command) (json.RawMessage, error) {
	var out struct {
		Return json.RawMessage `json:"return"`
	}
	err := c.do(ctx, http.MethodPost, route, vmi, cmd, &out)
	return out.Return, err
}

// Console opens vmi's serial console: a websocket of binary messages.
func (c *Client) Console(ctx context.Context, vmi string) (*websocket.Conn, error) {
	d := websocket.Dialer{
		NetDialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var nd net.Dialer
			return nd.DialContext(ctx, "unix", c.socket)
		},
		Subprotocols: []string{Subprotocol},
	}
	ws, resp, err := d.DialContext(ctx, "ws://agent"+DebugPrefix+RouteConsole+"?vmi="+url.QueryEscape(vmi), nil)
	if err != nil {
		if resp != nil {
			return nil, readError(resp)
		}
		return nil, fmt.Errorf("console %s: %w", vmi, err)
	}
	return ws, nil
}

func (c *Client) do(ctx context.Context, method, route, vmi string, body, out any) error {
	u := "http://agent" + DebugPrefix + route
	if vmi != "" {
		u += "?vmi=" + url.QueryEscape(vmi)
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("node API %s %s: %w", method, route, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return readError(resp)
	}
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("node API %s %s: decode: %w", method, route, err)
	}
	return nil
}

func readError(resp *http.Response) error {
	var e struct {
		Error string `json:"error"`
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if json.Unmarshal(b, &e) != nil || e.Error == "" {
		e.Error = string(bytes.TrimSpace(b))
	}
	return &Error{Code: resp.StatusCode, Message: e.Error}
}
