package web

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/store"
)

const testToken = "t0ken-for-the-tests"

// invocations records the commands the controls ran.
type invocations struct {
	mu   sync.Mutex
	runs [][]string
}

func (iv *invocations) invoke(_ context.Context, repo string, args ...string) (string, error) {
	iv.mu.Lock()
	defer iv.mu.Unlock()
	iv.runs = append(iv.runs, append([]string{repo}, args...))
	if args[0] == "approve" {
		return "", errors.New("S-9 is not an item of run r1")
	}
	return "ok\n", nil
}

func (iv *invocations) all() [][]string {
	iv.mu.Lock()
	defer iv.mu.Unlock()
	return append([][]string(nil), iv.runs...)
}

func controlServer(t *testing.T) (*httptest.Server, engine.Paths, *invocations) {
	t.Helper()
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	p, _ := fixture(t)
	iv := &invocations{}
	s := New(p, testToken)
	s.Invoke = iv.invoke
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return srv, p, iv
}

// do sends a request; hdr are header pairs.
func do(t *testing.T, c *http.Client, method, u string, form url.Values, hdr ...string) (int, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, _ := http.NewRequest(method, u, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// browser is a client with the page's cookies (it opened the printed
// URL) and the CSRF token the page carries.
func browser(t *testing.T, base string) (*http.Client, string) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	code, page := do(t, c, "GET", base+"/?token="+testToken, nil)
	m := regexp.MustCompile(`name="csrf" value="([0-9a-f]{64})"`).FindStringSubmatch(page)
	if code != 200 || m == nil {
		t.Fatalf("the page has no CSRF token: %d\n%s", code, page)
	}
	return c, m[1]
}

// The API reads the run as data, only with the token.
func TestAPIReads(t *testing.T) {
	srv, p, _ := controlServer(t)
	for _, path := range []string{"/api/state", "/api/items/S-1", "/api/transcripts/1", "/api/search?q=x", "/api/events?once=1", "/api/repos", "/api/csrf", "/api/timeline", "/api/dag", "/api/cost", "/items/S-1"} {
		if code, _ := do(t, nil, "GET", srv.URL+path, nil); code != http.StatusUnauthorized {
			t.Errorf("%s without the token: %d", path, code)
		}
	}
	auth := []string{"Authorization", "Bearer " + testToken}
	code, body := do(t, nil, "GET", srv.URL+"/api/state", nil, auth...)
	var st stateAnswer
	if code != 200 || json.Unmarshal([]byte(body), &st) != nil || st.State == nil || st.State.RunID != "r1" || st.Passed != 1 || st.Total != 2 || st.Status != "interrupted" {
		t.Errorf("/api/state: %d %s", code, body)
	}
	code, body = do(t, nil, "GET", srv.URL+"/api/items/S-1", nil, auth...)
	if code != 200 || !strings.Contains(body, `"status": "passed"`) || !strings.Contains(body, `"transcripts": [
    1
  ]`) {
		t.Errorf("/api/items/S-1: %d %s", code, body)
	}
	if code, _ := do(t, nil, "GET", srv.URL+"/api/items/S-9", nil, auth...); code != 404 {
		t.Errorf("/api/items/S-9: %d", code)
	}
	code, body = do(t, nil, "GET", srv.URL+"/api/transcripts/1", nil, auth...)
	if code != 200 || !strings.Contains(body, `"text": "# ralph iteration 1`) {
		t.Errorf("/api/transcripts/1: %d %s", code, body)
	}
	if code, _ := do(t, nil, "GET", srv.URL+"/api/transcripts/9", nil, auth...); code != 404 {
		t.Errorf("/api/transcripts/9: %d", code)
	}
	code, body = do(t, nil, "GET", srv.URL+"/api/search?q=STORY+s-1", nil, auth...)
	if code != 200 || !strings.Contains(body, `"where": "transcript"`) || !strings.Contains(body, `"line": 1`) || !strings.Contains(body, `"complete": true`) {
		t.Errorf("/api/search: %d %s", code, body)
	}
	// The event stream as data: each line of events.jsonl with its
	// offset; from an offset, only what follows.
	code, body = do(t, nil, "GET", srv.URL+"/api/events?once=1", nil, auth...)
	m := regexp.MustCompile(`(?m)^id: (\d+)$`).FindStringSubmatch(body)
	if code != 200 || !strings.Contains(body, "event: ralph\n") || !strings.Contains(body, `data: {"type":"iteration_started"`) || m == nil {
		t.Fatalf("/api/events: %d %s", code, body)
	}
	f, _ := os.OpenFile(p.Events, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"type":"item_passed","item":"S-2"}` + "\n" + `{"type":"torn`)
	f.Close()
	code, body = do(t, nil, "GET", srv.URL+"/api/events?once=1&from="+m[1], nil, auth...)
	if code != 200 || strings.Contains(body, "iteration_started") || !strings.Contains(body, `data: {"type":"item_passed","item":"S-2"}`) || strings.Contains(body, "torn") {
		t.Errorf("/api/events from %s: %d %s", m[1], code, body)
	}
}

// A dashboard started before the run shows none, then the run when it
// begins; several repositories on one page, each by its number.
func TestAPIWatch(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	p, st := fixture(t)
	later := engine.PathsFor(t.TempDir())
	s := New(p, testToken)
	s.Watch(later)
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	auth := []string{"Authorization", "Bearer " + testToken}
	if code, body := do(t, nil, "GET", srv.URL+"/api/state?repo=1", nil, auth...); code != 200 || !strings.Contains(body, `"status": "no run"`) {
		t.Errorf("before the run: %d %s", code, body)
	}
	os.MkdirAll(later.Dir, 0o755)
	st.RunID = "r2"
	writeState(t, later, st)
	if code, body := do(t, nil, "GET", srv.URL+"/api/state?repo=1", nil, auth...); code != 200 || !strings.Contains(body, `"run_id": "r2"`) {
		t.Errorf("after the run began: %d %s", code, body)
	}
	code, body := do(t, nil, "GET", srv.URL+"/api/repos", nil, auth...)
	if code != 200 || !strings.Contains(body, `"run_id": "r1"`) || !strings.Contains(body, `"run_id": "r2"`) {
		t.Errorf("/api/repos: %d %s", code, body)
	}
	if code, _ := do(t, nil, "GET", srv.URL+"/api/state?repo=2", nil, auth...); code != 404 {
		t.Errorf("repo 2: %d", code)
	}
	if code, body := do(t, nil, "GET", srv.URL+"/?repo=1", nil, auth...); code != 200 || !strings.Contains(body, `id="repos"`) || !strings.Contains(body, "?repo=0") || !strings.Contains(body, "Run r2") {
		t.Errorf("the page of repo 1: %d\n%s", code, body)
	}
}

// The controls run the CLI's commands: from the page (the session's
// CSRF token), or from a script with the bearer token. Forms go back to
// the page with what happened.
func TestControls(t *testing.T) {
	srv, p, iv := controlServer(t)
	c, csrf := browser(t, srv.URL)
	code, body := do(t, c, "POST", srv.URL+"/api/control/pause", url.Values{"csrf": {csrf}}, "Origin", srv.URL, "Sec-Fetch-Site", "same-origin")
	if code != 200 || !strings.Contains(body, `"ok": true`) {
		t.Errorf("pause: %d %s", code, body)
	}
	do(t, c, "POST", srv.URL+"/api/control/guide", url.Values{"csrf": {csrf}, "text": {"-use tabs"}, "item": {"S-2"}})
	do(t, c, "POST", srv.URL+"/api/control/reject", url.Values{"csrf": {csrf}, "id": {"S-2"}, "reason": {"smaller"}})
	do(t, nil, "POST", srv.URL+"/api/control/retry", url.Values{"id": {"S-2"}}, "Authorization", "Bearer "+testToken)
	do(t, nil, "POST", srv.URL+"/api/control/stop", nil, "Authorization", "Bearer "+testToken)
	code, body = do(t, c, "POST", srv.URL+"/api/control/approve", url.Values{"csrf": {csrf}, "id": {"S-9"}})
	if code != http.StatusUnprocessableEntity || !strings.Contains(body, "S-9 is not an item") {
		t.Errorf("a failing approve: %d %s", code, body)
	}
	want := [][]string{{p.Root, "pause"}, {p.Root, "guide", "--by", "the web dashboard", "--item", "S-2", "--", "-use tabs"},
		{p.Root, "reject", "S-2", "--reason", "smaller"}, {p.Root, "retry", "S-2"}, {p.Root, "stop"}, {p.Root, "approve", "S-9"}}
	if got := iv.all(); !equal(got, want) {
		t.Errorf("ran %q\nwant %q", got, want)
	}
	// Bad requests run nothing.
	for _, f := range []url.Values{{"text": {" "}}, {}} {
		if code, _ := do(t, c, "POST", srv.URL+"/api/control/guide", withCSRF(f, csrf)); code != 400 {
			t.Errorf("guide %v: %d", f, code)
		}
	}
	for _, a := range []string{"reject", "frobnicate", "approve"} {
		if code, _ := do(t, c, "POST", srv.URL+"/api/control/"+a, url.Values{"csrf": {csrf}}); code != 400 {
			t.Errorf("%s without its fields: %d", a, code)
		}
	}
	// A form of the page is sent back to it with the command's word.
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	req, _ := http.NewRequest("POST", srv.URL+"/api/control/resume", strings.NewReader(url.Values{"csrf": {csrf}, "back": {"1"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if loc := resp.Header.Get("Location"); resp.StatusCode != 303 || !strings.HasPrefix(loc, "/?") || !strings.Contains(loc, "note=ralph+resume+done") {
		t.Errorf("a form's answer: %d %s", resp.StatusCode, loc)
	}
	if n := len(iv.all()); n != len(want)+1 {
		t.Errorf("%d commands ran, want %d", n, len(want)+1)
	}
}

func withCSRF(f url.Values, csrf string) url.Values {
	f.Set("csrf", csrf)
	return f
}

func equal(a, b [][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if strings.Join(a[i], "\x00") != strings.Join(b[i], "\x00") {
			return false
		}
	}
	return true
}

// Attacks on the controls: a cross-site form (with the person's cookie,
// as a browser would send it were it not SameSite), a request without
// the session's CSRF token or with another session's, a GET, a foreign
// Origin or Host, no token at all. None runs anything.
func TestControlsRefused(t *testing.T) {
	srv, _, iv := controlServer(t)
	c, csrf := browser(t, srv.URL)
	other, otherCSRF := browser(t, srv.URL)
	_ = other
	pause := srv.URL + "/api/control/pause"
	for name, tc := range map[string]struct {
		c    *http.Client
		form url.Values
		hdr  []string
		want int
	}{
		"no token":                {nil, url.Values{"csrf": {csrf}}, nil, 401},
		"cookie, no csrf":         {c, url.Values{}, nil, 403},
		"cookie, wrong csrf":      {c, url.Values{"csrf": {strings.Repeat("0", 64)}}, nil, 403},
		"another session's csrf":  {c, url.Values{"csrf": {otherCSRF}}, nil, 403},
		"cross-site fetch":        {c, url.Values{"csrf": {csrf}}, []string{"Sec-Fetch-Site", "cross-site"}, 403},
		"same-site fetch":         {c, url.Values{"csrf": {csrf}}, []string{"Sec-Fetch-Site", "same-site"}, 403},
		"foreign origin":          {c, url.Values{"csrf": {csrf}}, []string{"Origin", "http://evil.example"}, 403},
		"foreign origin, bearer":  {nil, url.Values{}, []string{"Origin", "http://evil.example", "Authorization", "Bearer " + testToken}, 403},
		"rebinding host":          {c, url.Values{"csrf": {csrf}}, []string{"Host", "evil.example:7332"}, 403},
		"rebinding host, bearer":  {nil, url.Values{}, []string{"Host", "evil.example", "Authorization", "Bearer " + testToken}, 403},
		"wrong bearer":            {nil, url.Values{}, []string{"Authorization", "Bearer nope"}, 401},
		"csrf in a header, fine":  {c, url.Values{}, []string{"X-CSRF-Token", csrf}, 200},
		"bearer, no csrf, fine":   {nil, url.Values{}, []string{"Authorization", "Bearer " + testToken}, 200},
		"same-origin fetch, fine": {c, url.Values{"csrf": {csrf}}, []string{"Sec-Fetch-Site", "same-origin"}, 200},
	} {
		before := len(iv.all())
		code, body := do(t, tc.c, "POST", pause, tc.form, tc.hdr...)
		ran := len(iv.all()) - before
		if code != tc.want || (tc.want != 200) != (ran == 0) {
			t.Errorf("%s: %d (want %d), %d commands ran: %s", name, code, tc.want, ran, body)
		}
	}
	if code, _ := do(t, c, "GET", pause+"?csrf="+csrf, nil); code != http.StatusMethodNotAllowed {
		t.Errorf("GET a control: %d", code)
	}
	// Without a token the dashboard only reads.
	p, _ := fixture(t)
	s := New(p, "")
	s.Invoke = iv.invoke
	open := httptest.NewServer(s.Handler())
	defer open.Close()
	before := len(iv.all())
	if code, page := do(t, nil, "GET", open.URL+"/", nil); code != 200 || strings.Contains(page, `name="csrf"`) {
		t.Errorf("a page without a token offers controls: %d", code)
	}
	if code, _ := do(t, nil, "POST", open.URL+"/api/control/pause", url.Values{}); code != 403 || len(iv.all()) != before {
		t.Errorf("a control without a token: %d", code)
	}
}

// A secret is masked in every answer of the API, the page's search and
// the event stream, and a search for it finds nothing.
func TestAPIMasked(t *testing.T) {
	srv, p, _ := controlServer(t)
	const key = "sk-ant-api03-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	os.WriteFile(filepath.Join(p.Transcripts, "0001-S-1.log"), []byte("the key is "+key+"\n"), 0o644)
	f, _ := os.OpenFile(p.Events, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"type":"item_failed","iteration":1,"item":"S-1","message":"gate printed ` + key + `"}` + "\n")
	f.Close()
	st, _ := engine.LoadState(p.State)
	st.Items["S-2"].Title = "use " + key
	writeState(t, p, st)
	if _, err := engine.GiveGuidance(p, "the key "+key, "", "test", 0, st.StartedAt); err != nil {
		t.Fatal(err)
	}
	auth := []string{"Authorization", "Bearer " + testToken}
	for _, path := range []string{"/api/state", "/api/items/S-2", "/api/transcripts/1", "/api/search?q=key", "/api/events?once=1", "/?q=key"} {
		code, body := do(t, nil, "GET", srv.URL+path, nil, auth...)
		if code != 200 || strings.Contains(body, key) || !strings.Contains(body, "[masked]") {
			t.Errorf("%s: %d\n%s", path, code, body)
		}
	}
	for _, q := range []string{key, "AAAAAAAAAAAAAAAA", "sk-ant"} {
		if code, body := do(t, nil, "GET", srv.URL+"/api/search?q="+url.QueryEscape(q), nil, auth...); code != 200 || !strings.Contains(body, `"hits": []`) {
			t.Errorf("a search for %q found the secret: %d %s", q, code, body)
		}
	}
}

// The page folds each iteration (<details>) under a title people read
// (the story, its attempt, what came of it) with its events' messages,
// and lists the pending guidance and a search's matches. A run a process
// holds has its controls; one that ended has none.
func TestPageIterationsAndSearch(t *testing.T) {
	srv, p, _ := controlServer(t)
	if _, err := engine.GiveGuidance(p, "prefer small commits", "S-2", "test", 2, engine.State{}.StartedAt); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(p.Events, []byte(`{"time":"2026-01-02T10:00:00Z","type":"iteration_started","item":"S-1","iteration":1,"attempt":1,"message":"iteration 1/20 · S-1 one · attempt 1/3","data":{"title":"one","transcript":"`+filepath.Join(p.Transcripts, "0001-S-1.log")+`"}}
{"time":"2026-01-02T10:00:04Z","type":"item_passed","item":"S-1","iteration":1,"message":"S-1 passed (test passed), commit 01234567"}
`), 0o644)
	lock, err := store.TryLock(p.Lock)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := browser(t, srv.URL)
	code, body := do(t, c, "GET", srv.URL+"/?q=ITERATION+1", nil)
	for _, want := range []string{`<details id="iteration-1"><summary><span class="mark passed">✓</span> Iteration 1 · S-1 one · attempt 1/3 · ✓ passed after 4.0s</summary>`,
		"10:00:04  S-1 passed (test passed), commit 01234567", `id="guidance"`, "g1 (S-2): prefer small commits",
		"matches for <b>ITERATION 1</b>", `transcript 1</a> line 1: <code># ralph iteration 1`, `id="pause"`, `id="stop"`, `id="guide-text"`, `<option value="S-2">`} {
		if code != 200 || !strings.Contains(body, want) {
			t.Errorf("the page lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, "item_passed") {
		t.Errorf("the page names events by their types:\n%s", body)
	}
	// The run ends: no pause, no stop, no guidance form.
	lock.Unlock()
	st, _ := engine.LoadState(p.State)
	st.Status = engine.StatusComplete
	writeState(t, p, st)
	_, body = do(t, c, "GET", srv.URL+"/", nil)
	for _, control := range []string{`id="pause"`, `id="stop"`, `id="resume"`, `id="guide-text"`} {
		if strings.Contains(body, control) {
			t.Errorf("a finished run's page has %s:\n%s", control, body)
		}
	}
}
