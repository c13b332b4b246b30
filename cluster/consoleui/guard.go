package consoleui

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
)

// verdict is what guard decides for one request.
type verdict int

const (
	allow        verdict = iota // serve it
	login                       // right token in the URL: set the cookie, redirect to the URL without it
	badHost                     // Host is not the server's own (DNS rebinding): 403
	badOrigin                   // Origin of another site: 403
	unauthorized                // no or wrong token/cookie: 401
)

// guard holds what a request must match: the per-run token and the
// server's own address.
type guard struct {
	token  string
	cookie string // cookie name; cookies are not port-scoped, so it names the port
	hosts  []string
	origin string
}

// newGuard returns the guard of a server listening on hostport (an IP and
// port) with token. Requests may name it as the IP or, for a loopback IP,
// as localhost.
func newGuard(token, ip, port string) *guard {
	hp := ip + ":" + port
	if strings.Contains(ip, ":") {
		hp = "[" + ip + "]:" + port
	}
	hosts := []string{hp}
	if ip == "127.0.0.1" || ip == "::1" {
		hosts = append(hosts, "localhost:"+port)
	}
	return &guard{token: token, cookie: "nodevirt-console-" + port, hosts: hosts, origin: "http://" + hp}
}

// newToken returns 32 random bytes, URL-safe base64.
func newToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// check decides about r. It is pure: it reads only r and g.
func (g *guard) check(r *http.Request) verdict {
	if !g.ownHost(r.Host) {
		return badHost
	}
	if o := r.Header.Get("Origin"); o != "" && !g.ownOrigin(o) {
		return badOrigin
	}
	if t := r.URL.Query().Get("token"); t != "" && r.Method == http.MethodGet && r.URL.Path == "/" {
		if g.equal(t) {
			return login
		}
		return unauthorized
	}
	c, err := r.Cookie(g.cookie)
	if err != nil || !g.equal(c.Value) {
		return unauthorized
	}
	// A state-changing request or a websocket must say where it comes from
	// (browsers always send Origin on these).
	if (r.Method != http.MethodGet && r.Method != http.MethodHead || isUpgrade(r)) && r.Header.Get("Origin") == "" {
		return badOrigin
	}
	return allow
}

func (g *guard) equal(t string) bool {
	return subtle.ConstantTimeCompare([]byte(t), []byte(g.token)) == 1
}

func (g *guard) ownHost(h string) bool {
	for _, want := range g.hosts {
		if strings.EqualFold(h, want) {
			return true
		}
	}
	return false
}

func (g *guard) ownOrigin(o string) bool {
	for _, h := range g.hosts {
		if strings.EqualFold(o, "http://"+h) {
			return true
		}
	}
	return false
}

func isUpgrade(r *http.Request) bool {
	return r.Header.Get("Upgrade") != ""
}

// wrap returns h behind the guard.
func (g *guard) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch g.check(r) {
		case allow:
			h.ServeHTTP(w, r)
		case login:
			http.SetCookie(w, &http.Cookie{
				Name: g.cookie, Value: g.token, Path: "/",
				HttpOnly: true, SameSite: http.SameSiteStrictMode,
			})
			http.Redirect(w, r, "/", http.StatusSeeOther)
		case badHost:
			http.Error(w, "forbidden: unexpected Host header", http.StatusForbidden)
		case badOrigin:
			http.Error(w, "forbidden: cross-origin request", http.StatusForbidden)
		default:
			http.Error(w, "unauthorized: open the URL that `kubectl nodevirt console-ui` printed (it carries this run's token)",
				http.StatusUnauthorized)
		}
	})
}
