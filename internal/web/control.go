package web

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// The controls act on the run through the command line's own commands
// (Invoke): pause, resume, stop, approve, reject, guide, retry and
// answer are exactly `ralph pause` … `ralph answer ID TEXT`, with their
// checks, messages and records.
//
// A control changes the run, so more guards it than the reading:
//
//   - POST only, and only when the server has a token (the httpauth guard
//     then demands it: a bearer header or the cookie the page got);
//   - the Host check of the guard (DNS rebinding), and its Origin check:
//     a browser names the page a request comes from;
//   - Sec-Fetch-Site, which browsers set and pages cannot: a request from
//     another site is refused even where Origin is missing;
//   - a CSRF token per browser session: a session cookie (SameSite=Strict,
//     HttpOnly) and, in the form or the X-CSRF-Token header, the HMAC of
//     that cookie under a key the server made when it started. A page of
//     another site can neither read the token (no CORS) nor send the
//     cookie. A script that sends the bearer header needs no CSRF token:
//     a browser never adds that header by itself.

// sessionCookie names a browser session of the dashboard.
const sessionCookie = "ralph_session"

// session gives the browser a session cookie when it has none.
func (s *Server) session(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(sessionCookie); err == nil && len(c.Value) >= 32 {
		return
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	c := &http.Cookie{Name: sessionCookie, Value: hex.EncodeToString(b), Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil}
	http.SetCookie(w, c)
	r.AddCookie(c) // the page rendered now carries its token
}

// csrfOf is the CSRF token of the request's session, "" when the
// controls are off or there is no session.
func (s *Server) csrfOf(r *http.Request) string {
	if !s.controls() {
		return ""
	}
	c, err := r.Cookie(sessionCookie)
	if err != nil || c.Value == "" {
		return ""
	}
	m := hmac.New(sha256.New, s.csrfKey)
	m.Write([]byte(c.Value))
	return hex.EncodeToString(m.Sum(nil))
}

// controls reports whether the dashboard may act: it can run commands and
// every request must carry the token.
func (s *Server) controls() bool { return s.Invoke != nil && s.Token != "" }

// apiCSRF gives the session (a new one when it has none) its token.
func (s *Server) apiCSRF(w http.ResponseWriter, r *http.Request) {
	if !s.controls() {
		s.fail(w, http.StatusForbidden, "the controls are off: start ralph serve with a token")
		return
	}
	s.session(w, r)
	s.writeJSON(w, http.StatusOK, map[string]string{"csrf": s.csrfOf(r)})
}

// bearer reports whether the request authenticated with the bearer
// header (the guard has checked it is the token).
func bearer(r *http.Request) bool {
	return strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ")
}

// crossSite says why a control request may come from another site, or "".
func (s *Server) crossSite(r *http.Request) string {
	switch site := r.Header.Get("Sec-Fetch-Site"); site {
	case "", "same-origin", "none":
	default:
		return "the request comes from another site (Sec-Fetch-Site: " + site + ")"
	}
	if bearer(r) {
		return ""
	}
	want := s.csrfOf(r)
	got := r.Header.Get("X-CSRF-Token")
	if got == "" {
		got = r.PostFormValue("csrf")
	}
	if want == "" || !hmac.Equal([]byte(got), []byte(want)) {
		return "the request lacks this session's CSRF token (reload the page)"
	}
	return ""
}

// controlAnswer is a control's answer.
type controlAnswer struct {
	OK      bool   `json:"ok"`
	Action  string `json:"action"`
	Message string `json:"message"`
	Output  string `json:"output,omitempty"`
}

// control runs one control: the CLI's command for it, in the request's
// repository. A form of the page (back=1) is sent back to the page with
// what happened; any other caller gets JSON.
func (s *Server) control(w http.ResponseWriter, r *http.Request) {
	if !s.controls() {
		s.fail(w, http.StatusForbidden, "the controls are off: start ralph serve with a token")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		s.fail(w, http.StatusBadRequest, "%v", err)
		return
	}
	if why := s.crossSite(r); why != "" {
		s.fail(w, http.StatusForbidden, "ralph: refused: %s", why)
		return
	}
	rp, n := s.repoOf(r)
	if rp == nil {
		s.fail(w, http.StatusNotFound, "no such repository")
		return
	}
	action := r.PathValue("action")
	args, bad := controlArgs(action, r)
	if bad != "" {
		s.fail(w, http.StatusBadRequest, "%s", bad)
		return
	}
	out, err := s.Invoke(r.Context(), rp.paths.Root, args...)
	a := controlAnswer{OK: err == nil, Action: action, Output: strings.TrimSpace(out), Message: "ralph " + action + " done"}
	code := http.StatusOK
	if err != nil {
		a.Message, code = err.Error(), http.StatusUnprocessableEntity
	}
	if r.PostFormValue("back") != "" {
		q := url.Values{"repo": {strconv.Itoa(n)}, "note": {s.Mask.String(a.Message)}}
		http.Redirect(w, r, "/?"+q.Encode(), http.StatusSeeOther)
		return
	}
	s.writeJSON(w, code, a)
}

// by names the dashboard in what a control records.
const by = "the web dashboard"

// controlArgs is the command line of a control, or what is wrong with
// the request.
func controlArgs(action string, r *http.Request) (args []string, bad string) {
	id := strings.TrimSpace(r.PostFormValue("id"))
	need := func(what string, v string) string {
		if v == "" {
			return action + " needs " + what
		}
		return ""
	}
	switch action {
	case "pause", "resume", "stop":
		return []string{action}, ""
	case "approve", "retry":
		return []string{action, id}, need("an item (id)", id)
	case "reject":
		reason := strings.TrimSpace(r.PostFormValue("reason"))
		if b := need("an item (id)", id) + need("a reason", reason); b != "" {
			return nil, b
		}
		return []string{"reject", id, "--reason", reason}, ""
	case "guide":
		text := strings.TrimSpace(r.PostFormValue("text"))
		args := []string{"guide", "--by", by}
		if item := strings.TrimSpace(r.PostFormValue("item")); item != "" {
			args = append(args, "--item", item)
		}
		return append(args, "--", text), need("a text", text)
	case "answer":
		text := strings.TrimSpace(r.PostFormValue("text"))
		if b := need("a question (id)", id) + need("a text", text); b != "" {
			return nil, b
		}
		return []string{"answer", "--by", by, "--", id, text}, ""
	}
	return nil, "no control " + strconv.Quote(action) + " (pause, resume, stop, approve, reject, guide, retry, answer)"
}
