package subresources

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// agentProxy forwards VMI requests to node agents over mutual TLS.
type agentProxy struct {
	agents    AgentLocator
	clientTLS ClientTLS
	port      int
	log       *slog.Logger
	transport *http.Transport
}

// nodeKey carries the node name of a proxied request to the dialer, which
// sets it as the TLS ServerName.
type nodeKey struct{}

func newAgentProxy(agents AgentLocator, clientTLS ClientTLS, port int, log *slog.Logger) *agentProxy {
	p := &agentProxy{agents: agents, clientTLS: clientTLS, port: port, log: log}
	p.transport = &http.Transport{
		DialTLSContext:        p.dialTLS,
		MaxIdleConnsPerHost:   8,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: 60 * time.Second,
	}
	return p
}

// dialTLS dials an agent with the current client TLS configuration and
// the node's name as ServerName (the agent's certificate names its node).
func (p *agentProxy) dialTLS(ctx context.Context, network, addr string) (net.Conn, error) {
	node, _ := ctx.Value(nodeKey{}).(string)
	if node == "" {
		return nil, fmt.Errorf("dial agent %s: no node name in the request context", addr)
	}
	base, err := p.clientTLS(node)
	if err != nil {
		return nil, fmt.Errorf("dial agent of node %s: client TLS: %w", node, err)
	}
	cfg := base.Clone()
	if cfg.ServerName == "" {
		cfg.ServerName = node
	}
	d := tls.Dialer{NetDialer: &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}, Config: cfg}
	return d.DialContext(ctx, network, addr)
}

// serve proxies r to the agent of vmi's node as .../virtualmachineinstances/
// {name}/sub. Error answers of the agent become metav1.Status with the
// agent's code and prefix before the message. Websocket upgrades pass
// through byte for byte.
func (p *agentProxy) serve(w http.ResponseWriter, r *http.Request, vmi *v1.VirtualMachineInstance, sub, prefix string) {
	node := vmi.Status.NodeName
	if node == "" {
		writeStatus(w, conflictVMI(vmi.Name, prefix+msgVMINotRunning))
		return
	}
	ip, err := p.agents.AgentIP(node)
	if err != nil {
		writeStatus(w, apierrors.NewServiceUnavailable(fmt.Sprintf("%snode agent of node %s: %v", prefix, node, err)))
		return
	}
	path := "/v1/namespaces/" + vmi.Namespace + "/virtualmachineinstances/" + vmi.Name + "/" + sub
	host := net.JoinHostPort(ip, strconv.Itoa(p.port))
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = "https", host
			pr.Out.URL.Path, pr.Out.URL.RawPath = path, ""
			pr.Out.Host = ""
			for k := range pr.Out.Header {
				if dropHeader(k) {
					pr.Out.Header.Del(k)
				}
			}
		},
		Transport:     p.transport,
		FlushInterval: -1,
		ModifyResponse: func(resp *http.Response) error {
			return rewriteAgentError(resp, prefix)
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if errors.Is(err, context.Canceled) {
				return
			}
			p.log.Info("node agent request failed", "node", node, "vmi", vmi.Namespace+"/"+vmi.Name, "path", sub, "err", err)
			writeStatus(w, apierrors.NewInternalError(fmt.Errorf("%snode agent of node %s: %w", prefix, node, err)))
		},
		ErrorLog: slog.NewLogLogger(p.log.Handler(), slog.LevelDebug),
	}
	rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), nodeKey{}, node)))
}

// dropHeader reports whether a client header stays here: the caller's
// credentials and identity (the agent trusts nodevirt-api's certificate,
// not the caller) and the API server's proxy headers.
func dropHeader(k string) bool {
	k = http.CanonicalHeaderKey(k)
	return k == "Authorization" || k == "Cookie" ||
		strings.HasPrefix(k, "X-Remote-") || strings.HasPrefix(k, "Impersonate-") ||
		strings.HasPrefix(k, "X-Forwarded-")
}

// rewriteAgentError turns an agent's error answer ({"error": "..."}) into
// a metav1.Status with the same code.
func rewriteAgentError(resp *http.Response, prefix string) error {
	if resp.StatusCode < 400 {
		return nil
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	var e struct {
		Error string `json:"error"`
	}
	msg := strings.TrimSpace(string(b))
	if json.Unmarshal(b, &e) == nil && e.Error != "" {
		msg = e.Error
	}
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	st := statusFromCode(resp.StatusCode, prefix+msg).(*apierrors.StatusError).Status()
	st.Kind, st.APIVersion = "Status", "v1"
	out, err := json.Marshal(&st)
	if err != nil {
		return err
	}
	resp.Body = io.NopCloser(bytes.NewReader(out))
	resp.ContentLength = int64(len(out))
	resp.Header.Set("Content-Length", strconv.Itoa(len(out)))
	resp.Header.Set("Content-Type", "application/json")
	return nil
}
