package httpauth

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
)

// The token is made once, kept for its owner only, and read back after.
func TestLoadOrCreateToken(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".ralph", "token")
	tok, created, err := LoadOrCreateToken(path)
	if err != nil || !created || len(tok) != 32 {
		t.Fatalf("first: %q %v %v", tok, created, err)
	}
	fi, _ := os.Stat(path)
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", fi.Mode())
	}
	os.Chmod(path, 0o644)
	again, created, err := LoadOrCreateToken(path)
	if err != nil || created || again != tok {
		t.Fatalf("second: %q %v %v", again, created, err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode after reading %v", fi.Mode())
	}
}

func TestGuard(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) })
	g := &Guard{Token: "tok-0123456789", Hosts: []string{"box.lan"}}
	h := g.Wrap(ok)
	for _, c := range []struct {
		host, origin, auth string
		want               int
	}{
		{"127.0.0.1:1", "", "Bearer tok-0123456789", 204},
		{"box.lan:1", "http://box.lan:1", "Bearer tok-0123456789", 204},
		{"127.0.0.1:1", "", "", 401},
		{"127.0.0.1:1", "", "Bearer tok", 401},
		{"127.0.0.1:1", "", "Basic tok-0123456789", 401},
		{"evil.example:1", "", "Bearer tok-0123456789", 403},
		{"127.0.0.1:1", "http://evil.example", "Bearer tok-0123456789", 403},
		{"127.0.0.1:1", "http://127.0.0.1:2", "Bearer tok-0123456789", 403},
		{"127.0.0.1:1", "null", "Bearer tok-0123456789", 403},
		{"", "", "Bearer tok-0123456789", 403},
	} {
		req := httptest.NewRequest("POST", "/mcp", nil)
		req.Host = c.host
		if c.origin != "" {
			req.Header.Set("Origin", c.origin)
		}
		if c.auth != "" {
			req.Header.Set("Authorization", c.auth)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != c.want {
			t.Errorf("%+v: %d", c, rec.Code)
		}
	}
}
