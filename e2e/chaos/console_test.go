package chaos

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/gorilla/websocket"
	"k8s.io/client-go/rest"
)

// consoleOutageMax is the longest a resident may go without a working
// serial console through the cluster: a kube-apiserver outage (30 s and
// its restart) included.
const consoleOutageMax = 2 * time.Minute

// consoleResidents keeps a serial console open to every resident through
// the cluster (kube-apiserver → nodevirt-api → the agent), as virtctl
// console does, and reopens it whenever it drops (an agent restart ends
// the stream; virtctl's user would reconnect). Every opened console must
// echo a typed line. It records the opens and each resident's longest
// time without a working console until ctx ends.
func (h *harness) consoleResidents(ctx context.Context) {
	d, header, base, err := h.consoleDialer()
	if err != nil {
		h.violate(fmt.Sprintf("console: %v", err))
		return
	}
	done := make(chan struct{})
	for name := range h.residents {
		go func() {
			defer func() { done <- struct{}{} }()
			h.console(ctx, d, base+name+"/console", header, name)
		}()
	}
	for range h.residents {
		<-done
	}
}

// consoleDialer dials VMI consoles through the cluster as virtctl does:
// the websocket, its header and the URL every VMI's name and "/console"
// complete.
func (h *harness) consoleDialer() (*websocket.Dialer, http.Header, string, error) {
	tlsCfg, err := rest.TLSConfigFor(h.rc)
	if err != nil {
		return nil, nil, "", fmt.Errorf("TLS config: %w", err)
	}
	header := http.Header{}
	if h.rc.BearerToken != "" {
		header.Set("Authorization", "Bearer "+h.rc.BearerToken)
	}
	d := &websocket.Dialer{TLSClientConfig: tlsCfg, Subprotocols: []string{"plain.kubevirt.io"}, HandshakeTimeout: 15 * time.Second}
	base := "wss" + strings.TrimPrefix(h.rc.Host, "https") + "/apis/subresources.kubevirt.io/v1/namespaces/" + namespace + "/virtualmachineinstances/"
	return d, header, base, nil
}

// consoleRun types command on VMI name's serial console and returns what
// the guest printed once it matches want (within 20 s).
func (h *harness) consoleRun(ctx context.Context, name, command string, want *regexp.Regexp) (string, error) {
	d, header, base, err := h.consoleDialer()
	if err != nil {
		return "", err
	}
	ws, resp, err := d.DialContext(ctx, base+name+"/console", header)
	if err != nil {
		if resp != nil {
			resp.Body.Close()
			return "", fmt.Errorf("console of %s: %w (HTTP %d)", name, err, resp.StatusCode)
		}
		return "", fmt.Errorf("console of %s: %w", name, err)
	}
	defer ws.Close()
	if err := ws.WriteMessage(websocket.BinaryMessage, []byte(command+"\n")); err != nil {
		return "", err
	}
	_ = ws.SetReadDeadline(time.Now().Add(20 * time.Second))
	var seen strings.Builder
	for !want.MatchString(seen.String()) {
		_, msg, err := ws.ReadMessage()
		if err != nil {
			return "", fmt.Errorf("console of %s: no answer to %q: %w (read %q)", name, command, err, seen.String())
		}
		seen.Write(msg)
	}
	return seen.String(), nil
}

// console keeps one resident's console working until ctx ends.
func (h *harness) console(ctx context.Context, d *websocket.Dialer, url string, header http.Header, name string) {
	lost := time.Now() // no working console yet
	reported := false
	for ctx.Err() == nil {
		err := h.consoleSession(ctx, d, url, header, func() {
			if out := time.Since(lost); !lost.IsZero() {
				h.mu.Lock()
				h.report.ConsoleOpens++
				h.report.ConsoleOutageMax = max(h.report.ConsoleOutageMax, out)
				h.mu.Unlock()
			}
			lost, reported = time.Time{}, false
		})
		if ctx.Err() != nil {
			return
		}
		if lost.IsZero() {
			lost = time.Now()
		}
		if out := time.Since(lost); out > consoleOutageMax && !reported {
			reported = true
			h.violate(fmt.Sprintf("resident %s: no working console through the cluster for %v since %v (%v)", name,
				out.Round(time.Second), lost.Sub(h.start).Round(time.Second), err))
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// consoleSession opens the console, types a line until the guest echoes
// (then calls working) and reads until the stream ends; it returns why it
// ended.
func (h *harness) consoleSession(ctx context.Context, d *websocket.Dialer, url string, header http.Header, working func()) error {
	ws, resp, err := d.DialContext(ctx, url, header)
	if err != nil {
		if resp != nil {
			resp.Body.Close()
			return fmt.Errorf("%w (HTTP %d)", err, resp.StatusCode)
		}
		return err
	}
	defer ws.Close()
	stop := context.AfterFunc(ctx, func() { ws.Close() })
	defer stop()
	if err := ws.WriteMessage(websocket.BinaryMessage, []byte("echo chaos-console\n")); err != nil {
		return err
	}
	echoed := false
	var seen strings.Builder
	for {
		if !echoed {
			_ = ws.SetReadDeadline(time.Now().Add(15 * time.Second))
		} else {
			_ = ws.SetReadDeadline(time.Time{})
		}
		_, msg, err := ws.ReadMessage()
		if err != nil {
			if !echoed {
				return fmt.Errorf("no echo: %w", err)
			}
			return err
		}
		if !echoed {
			seen.Write(msg)
			if strings.Contains(seen.String(), "chaos-console") {
				echoed = true
				working()
			}
		}
	}
}
