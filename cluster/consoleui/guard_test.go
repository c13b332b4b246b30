package consoleui

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestGuard_Check(t *testing.T) {
	g := newGuard("secret", "127.0.0.1", "8001")
	cookie := &http.Cookie{Name: "nodevirt-console-8001", Value: "secret"}
	tests := []struct {
		name   string
		method string
		target string
		host   string
		origin string
		cookie *http.Cookie
		ws     bool
		want   verdict
	}{
		{name: "token in URL", target: "/?token=secret", want: login},
		{name: "wrong token in URL", target: "/?token=guess", want: unauthorized},
		{name: "token on another path is no login", target: "/info?token=secret", want: unauthorized},
		{name: "no cookie", target: "/", want: unauthorized},
		{name: "cookie", target: "/k8s/api/v1/namespaces", cookie: cookie, want: allow},
		{name: "cookie via localhost", target: "/", host: "localhost:8001", cookie: cookie, want: allow},
		{name: "wrong cookie", target: "/", cookie: &http.Cookie{Name: cookie.Name, Value: "secreT"}, want: unauthorized},
		{name: "cookie of another port", target: "/", cookie: &http.Cookie{Name: "nodevirt-console-8002", Value: "secret"}, want: unauthorized},
		{name: "rebinding host", target: "/", host: "evil.example:8001", cookie: cookie, want: badHost},
		{name: "other port in host", target: "/", host: "127.0.0.1:9", cookie: cookie, want: badHost},
		{name: "same-origin PUT", method: http.MethodPut, target: "/k8s/x", origin: "http://127.0.0.1:8001", cookie: cookie, want: allow},
		{name: "PUT without origin", method: http.MethodPut, target: "/k8s/x", cookie: cookie, want: badOrigin},
		{name: "cross-site PUT", method: http.MethodPut, target: "/k8s/x", origin: "http://evil.example", cookie: cookie, want: badOrigin},
		{name: "cross-site GET", target: "/k8s/x", origin: "http://127.0.0.1:8002", cookie: cookie, want: badOrigin},
		{name: "same-origin websocket", target: "/k8s/ws", origin: "http://localhost:8001", cookie: cookie, ws: true, want: allow},
		{name: "websocket without origin", target: "/k8s/ws", cookie: cookie, ws: true, want: badOrigin},
		{name: "cross-site websocket", target: "/k8s/ws", origin: "https://evil.example", cookie: cookie, ws: true, want: badOrigin},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			method := tt.method
			if method == "" {
				method = http.MethodGet
			}
			r := httptest.NewRequest(method, tt.target, nil)
			r.Host = "127.0.0.1:8001"
			if tt.host != "" {
				r.Host = tt.host
			}
			if tt.origin != "" {
				r.Header.Set("Origin", tt.origin)
			}
			if tt.cookie != nil {
				r.AddCookie(tt.cookie)
			}
			if tt.ws {
				r.Header.Set("Connection", "Upgrade")
				r.Header.Set("Upgrade", "websocket")
			}
			if got := g.check(r); got != tt.want {
				t.Errorf("check = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestGuard_IPv6Loopback(t *testing.T) {
	g := newGuard("t", "::1", "5")
	r := httptest.NewRequest(http.MethodGet, "/?token=t", nil)
	r.Host = "[::1]:5"
	if got := g.check(r); got != login {
		t.Errorf("check = %v, want login", got)
	}
	if g.origin != "http://[::1]:5" {
		t.Errorf("origin = %q", g.origin)
	}
}

func TestGuard_LoginSetsCookieAndDropsToken(t *testing.T) {
	g := newGuard("secret", "127.0.0.1", "8001")
	h := g.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { t.Error("handler reached on login") }))
	r := httptest.NewRequest(http.MethodGet, "/?token=secret", nil)
	r.Host = "127.0.0.1:8001"
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/" {
		t.Fatalf("login: %d Location %q, want 303 to /", w.Code, w.Header().Get("Location"))
	}
	cs := w.Result().Cookies()
	if len(cs) != 1 || cs[0].Name != "nodevirt-console-8001" || cs[0].Value != "secret" || !cs[0].HttpOnly || cs[0].SameSite != http.SameSiteStrictMode {
		t.Errorf("cookie = %+v, want HttpOnly SameSite=Strict nodevirt-console-8001", cs)
	}
}

func TestNewToken_Unique(t *testing.T) {
	a, err := newToken()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := newToken()
	if a == b || len(a) < 40 {
		t.Errorf("tokens %q and %q: want distinct, ≥ 40 characters", a, b)
	}
}
