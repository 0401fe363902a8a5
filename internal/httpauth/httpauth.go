// Package httpauth guards ralph's HTTP control surfaces (`ralph mcp
// --http`, `ralph serve`): a bearer token (or, for a browser, a cookie the
// token set once), and the Host and Origin checks that keep a web page on
// another site — a DNS-rebinding one included — from reaching them
// through the user's browser.
package httpauth

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ralph-loop/ralph/internal/store"
)

// NewToken is a fresh random token (128 bits, hex).
func NewToken() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// LoadOrCreateToken reads the token kept in path, or makes one and keeps
// it there, readable by its owner only; created says it is new (the caller
// prints it, once).
func LoadOrCreateToken(path string) (token string, created bool, err error) {
	if b, err := os.ReadFile(path); err == nil {
		if t := strings.TrimSpace(string(b)); t != "" {
			// Kept for the owner only, whatever made the file wider.
			if err := os.Chmod(path, 0o600); err != nil {
				return "", false, err
			}
			return t, false, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", false, err
	}
	if token, err = NewToken(); err != nil {
		return "", false, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", false, err
	}
	if err := store.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		return "", false, err
	}
	return token, true, nil
}

// Guard wraps a handler with the checks every request passes.
type Guard struct {
	// Token, when set, must come as "Authorization: Bearer TOKEN" or in
	// the Cookie.
	Token string
	// Cookie, when set, is the name of a cookie that carries the token: a
	// request for a page with ?token=TOKEN sets it and is sent on to the
	// same address without the token (the token leaves the URL bar, the
	// history and the links).
	Cookie string
	// Hosts are host names (no port) a request may name in its Host
	// header besides IP addresses, "localhost" and this machine's name.
	Hosts []string
}

// Wrap is h behind the guard.
func (g *Guard) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !g.hostAllowed(r.Host) {
			http.Error(w, fmt.Sprintf("ralph: Host %q is not this server (start it with --allow-host to allow that name)", r.Host), http.StatusForbidden)
			return
		}
		if o := r.Header.Get("Origin"); o != "" && !g.originAllowed(o, r.Host) {
			http.Error(w, fmt.Sprintf("ralph: requests from the page at %q are refused", o), http.StatusForbidden)
			return
		}
		if g.Token == "" {
			h.ServeHTTP(w, r)
			return
		}
		if g.Cookie != "" && r.Method == http.MethodGet {
			if q := r.URL.Query(); q.Has("token") {
				if !g.matches(q.Get("token")) {
					http.Error(w, "ralph: wrong token", http.StatusUnauthorized)
					return
				}
				http.SetCookie(w, &http.Cookie{Name: g.Cookie, Value: g.Token, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
				q.Del("token")
				u := *r.URL
				u.RawQuery = q.Encode()
				http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
				return
			}
		}
		if !g.matches(g.presented(r)) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="ralph"`)
			http.Error(w, "ralph: a token is required (Authorization: Bearer TOKEN)", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// presented is the token the request carries: the bearer header, else
// the cookie.
func (g *Guard) presented(r *http.Request) string {
	if a := r.Header.Get("Authorization"); a != "" {
		if t, ok := strings.CutPrefix(a, "Bearer "); ok {
			return strings.TrimSpace(t)
		}
		return ""
	}
	if g.Cookie != "" {
		if c, err := r.Cookie(g.Cookie); err == nil {
			return c.Value
		}
	}
	return ""
}

func (g *Guard) matches(got string) bool {
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(g.Token)) == 1
}

// hostAllowed: a DNS-rebinding page reaches the server under its own
// name, which is none of these; an IP address cannot be rebound.
func (g *Guard) hostAllowed(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	if host == "" {
		return false
	}
	if net.ParseIP(host) != nil || host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	if name, err := os.Hostname(); err == nil && strings.EqualFold(host, name) {
		return true
	}
	return slices.ContainsFunc(g.Hosts, func(h string) bool { return strings.EqualFold(h, host) })
}

// originAllowed: a browser names the page a request comes from; only a
// page served from this server's own address may call it.
func (g *Guard) originAllowed(origin, host string) bool {
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return false
	}
	return strings.EqualFold(u.Host, host) && g.hostAllowed(u.Host)
}
