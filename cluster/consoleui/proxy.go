package consoleui

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
)

// ProxyPrefix is the path under which the page reaches the API server:
// /k8s/api/v1/... is the API server's /api/v1/....
const ProxyPrefix = "/k8s"

// strippedHeaders never leave for the API server: they are the browser's
// business with this server (the token cookie, the page's origin), and the
// agent behind nodevirt-api would refuse a websocket whose Origin is not
// its own host.
var strippedHeaders = []string{"Cookie", "Origin", "Referer", "Authorization"}

// newProxy returns a handler that forwards requests under ProxyPrefix to
// the API server of rc with rc's credentials. Websocket upgrades pass
// through: the transport answers a 101 with a read-write body, which
// httputil.ReverseProxy splices to the client; rest.TransportFor's
// wrappers (bearer token, exec plugin, impersonation, user agent) return
// the response unchanged, and net/http speaks HTTP/1.1 for upgrade
// requests. Responses are flushed at once (watches stream).
func newProxy(rc *rest.Config, log *slog.Logger) (http.Handler, error) {
	base, _, err := rest.DefaultServerURL(rc.Host, "", schema.GroupVersion{}, rest.IsConfigTransportTLS(*rc))
	if err != nil {
		return nil, fmt.Errorf("API server address %q: %w", rc.Host, err)
	}
	rt, err := rest.TransportFor(rc)
	if err != nil {
		return nil, fmt.Errorf("transport for %s: %w", base, err)
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(base)
			pr.Out.Host = ""
			for _, h := range strippedHeaders {
				pr.Out.Header.Del(h)
			}
		},
		Transport:     rt,
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			log.Warn("proxy to API server", "path", r.URL.Path, "err", err)
			writeStatus(w, http.StatusBadGateway, fmt.Sprintf("API server %s: %v", base.Host, err))
		},
	}
	return http.StripPrefix(ProxyPrefix, rp), nil
}

// writeStatus answers a Kubernetes Status, so the page reads proxy errors
// as it reads the API server's.
func writeStatus(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Message: msg, Code: int32(code),
		Reason: metav1.StatusReason(strings.ReplaceAll(http.StatusText(code), " ", "")),
	})
}
