package launcher

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"

	"github.com/nodevirt/nodevirt/node/launchspec"
)

// ErrConflict is returned (wrapped) by Client.Launch when the launcher
// already runs a different spec (HTTP 409).
var ErrConflict = errors.New("launcher runs a different spec")

// APIError is a non-2xx answer of the launcher.
type APIError struct {
	StatusCode int
	Message    string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("launcher answered %d: %s", e.StatusCode, e.Message)
}

// Client talks to one launcher over its unix socket (sockets/launcher.sock
// as the agent sees it from the host). It is safe for concurrent use.
type Client struct {
	socket string
	hc     *http.Client
}

// NewClient returns a client for the launcher listening on socketPath. No
// connection is made until a call.
func NewClient(socketPath string) *Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socketPath)
		},
		DisableKeepAlives: true,
	}
	return &Client{socket: socketPath, hc: &http.Client{Transport: tr}}
}

// Status returns the launcher's status.
func (c *Client) Status(ctx context.Context) (Status, error) {
	var st Status
	if err := c.do(ctx, http.MethodGet, "/v1/status", nil, &st); err != nil {
		return Status{}, fmt.Errorf("launcher %s: status: %w", c.socket, err)
	}
	return st, nil
}

// Launch sends spec (which must be sealed) and returns the status after the
// launcher accepted it: preparing or running. The same spec again is a
// no-op; a different spec while one runs fails with ErrConflict.
func (c *Client) Launch(ctx context.Context, spec launchspec.Spec) (Status, error) {
	body, err := json.Marshal(spec)
	if err != nil {
		return Status{}, fmt.Errorf("launcher %s: encode spec: %w", c.socket, err)
	}
	var st Status
	if err := c.do(ctx, http.MethodPut, "/v1/launch", body, &st); err != nil {
		return Status{}, fmt.Errorf("launcher %s: launch %s: %w", c.socket, spec.Hash, err)
	}
	return st, nil
}

func (c *Client) do(ctx context.Context, method, path string, body []byte, out any) error {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://launcher"+path, r)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("read answer: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		var e errorBody
		msg := string(bytes.TrimSpace(b))
		if json.Unmarshal(b, &e) == nil && e.Error != "" {
			msg = e.Error
		}
		apiErr := &APIError{StatusCode: resp.StatusCode, Message: msg}
		if resp.StatusCode == http.StatusConflict {
			return fmt.Errorf("%w: %w", ErrConflict, apiErr)
		}
		return apiErr
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("decode answer: %w", err)
	}
	return nil
}

// errorBody is the JSON body of an error answer.
type errorBody struct {
	Error string `json:"error"`
}
