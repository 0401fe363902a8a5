package web

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ralph-loop/ralph/internal/engine"
)

func writeState(t *testing.T, p engine.Paths, st *engine.State) {
	t.Helper()
	b, _ := json.Marshal(st)
	if err := os.WriteFile(p.State, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func fixture(t *testing.T) (engine.Paths, *engine.State) {
	root := t.TempDir()
	p := engine.PathsFor(root)
	os.MkdirAll(p.Transcripts, 0o755)
	prd := filepath.Join(root, "prd.json")
	os.WriteFile(prd, []byte(`{"project":"p","user_stories":[{"id":"S-1","title":"one"},{"id":"S-2","title":"two <b>","depends_on":["S-1"]}]}`), 0o644)
	tr := filepath.Join(p.Transcripts, "0001-S-1.log")
	os.WriteFile(tr, []byte("# ralph iteration 1 · story S-1 · attempt 1/3 · agent cmd\n"), 0o644)
	os.WriteFile(p.Events, []byte(`{"type":"iteration_started","item":"S-1","iteration":1,"data":{"transcript":"`+tr+`"}}`+"\n"), 0o644)
	os.WriteFile(p.Progress, []byte("## entry one\n"), 0o644)
	st := &engine.State{RunID: "r1", Source: "prd", SourcePath: prd, Status: engine.StatusRunning, Iteration: 1, MaxIterations: 20, MaxAttempts: 3, Order: []string{"S-1", "S-2"},
		Items: map[string]*engine.ItemState{"S-1": {ID: "S-1", Title: "one", Status: engine.ItemPassed, Commit: "0123456789ab"}, "S-2": {ID: "S-2", Title: "two <b>", Status: engine.ItemPending}}}
	writeState(t, p, st)
	return p, st
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// The page: the items (escaped), their levels and dependencies, progress,
// the transcripts; a transcript by its iteration.
func TestPage(t *testing.T) {
	p, _ := fixture(t)
	srv := httptest.NewServer(New(p, "").Handler())
	defer srv.Close()
	code, body := get(t, srv.URL+"/")
	if code != 200 {
		t.Fatalf("GET /: %d %s", code, body)
	}
	for _, want := range []string{`id="item-S-1" class="passed"`, `<td>two &lt;b&gt;</td>`, "<td>L2</td><td>S-1</td>", "01234567", "1/2 passed", "## entry one", `href="transcript/1?repo=0"`, "new EventSource"} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q:\n%s", want, body)
		}
	}
	if code, body := get(t, srv.URL+"/transcript/1"); code != 200 || !strings.Contains(body, "# ralph iteration 1") {
		t.Errorf("transcript 1: %d %s", code, body)
	}
	if code, _ := get(t, srv.URL+"/transcript/7"); code != 404 {
		t.Errorf("transcript 7: %d", code)
	}
}

// With a token every request needs it, the event stream included. The
// token in the address is traded once for a cookie: the page and its
// links never carry it.
func TestToken(t *testing.T) {
	p, _ := fixture(t)
	srv := httptest.NewServer(New(p, "s3cret-token").Handler())
	defer srv.Close()
	for _, path := range []string{"/", "/events", "/transcript/1", "/?token=wrong"} {
		if code, _ := get(t, srv.URL+path); code != http.StatusUnauthorized {
			t.Errorf("%s without the token: %d", path, code)
		}
	}
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	var redirects []string
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		redirects = append(redirects, req.URL.String())
		return nil
	}
	resp, err := c.Get(srv.URL + "/?token=s3cret-token")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	body := string(b)
	if resp.StatusCode != 200 || !strings.Contains(body, `href="transcript/1?repo=0"`) || strings.Contains(body, "s3cret-token") {
		t.Errorf("with the token: %d\n%s", resp.StatusCode, body)
	}
	if len(redirects) != 1 || strings.Contains(redirects[0], "token") {
		t.Errorf("the token was not taken out of the address: %v", redirects)
	}
	// The cookie now opens every page.
	if resp, err := c.Get(srv.URL + "/transcript/1"); err != nil || resp.StatusCode != 200 {
		t.Errorf("with the cookie: %v %v", err, resp)
	}
	req, _ := http.NewRequest("GET", srv.URL+"/transcript/1", nil)
	req.Header.Set("Authorization", "Bearer s3cret-token")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Errorf("Bearer: %v %v", err, resp)
	}
}

// Attack: a DNS-rebinding page in the person's browser reaches the
// dashboard under its own name (Host evil.example), or calls it from its
// own origin; both are refused, token or not. IP addresses, localhost
// and the names given are fine.
func TestForeignHostRefused(t *testing.T) {
	p, _ := fixture(t)
	s := New(p, "")
	s.Hosts = []string{"ci.internal"}
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	for host, want := range map[string]int{"evil.example": 403, "evil.example:7332": 403, "127.0.0.1.nip.io:7332": 403,
		"localhost:7332": 200, "127.0.0.1:7332": 200, "[::1]:7332": 200, "ci.internal:7332": 200, "CI.internal": 200} {
		req, _ := http.NewRequest("GET", srv.URL+"/", nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want || (want == 403 && strings.Contains(string(b), "S-1")) {
			t.Errorf("Host %s: %d (want %d)", host, resp.StatusCode, want)
		}
	}
	req, _ := http.NewRequest("GET", srv.URL+"/events?once=1", nil)
	req.Header.Set("Origin", "http://evil.example")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 403 {
		t.Errorf("a page of another origin read the events: %v %v", err, resp)
	}
}

// Everything the dashboard shows is masked: a key in a transcript, the
// progress log or an item's title.
func TestMasked(t *testing.T) {
	p, st := fixture(t)
	const key = "sk-ant-api03-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	os.WriteFile(filepath.Join(p.Transcripts, "0001-S-1.log"), []byte("the key is "+key+"\n"), 0o644)
	os.WriteFile(p.Progress, []byte("## learned "+key+"\n"), 0o644)
	st.Items["S-2"].Title = "use " + key
	writeState(t, p, st)
	srv := httptest.NewServer(New(p, "").Handler())
	defer srv.Close()
	for _, path := range []string{"/", "/transcript/1", "/events?once=1"} {
		code, body := get(t, srv.URL+path)
		if code != 200 || strings.Contains(body, key) || !strings.Contains(body, "[masked]") {
			t.Errorf("%s: %d\n%s", path, code, body)
		}
	}
}

// The event stream sends the live part at once, then again when the run
// changes.
func TestEvents(t *testing.T) {
	p, st := fixture(t)
	s := New(p, "")
	s.Every = 50 * time.Millisecond
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	r := bufio.NewReader(resp.Body)
	// next is the next event of the items (the other parts' events come
	// between).
	next := func() string {
		var b strings.Builder
		for {
			l, err := r.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			if l != "\n" {
				b.WriteString(l)
				continue
			}
			if strings.HasPrefix(b.String(), "event: items\n") {
				return b.String()
			}
			b.Reset()
		}
	}
	first := next()
	if !strings.Contains(first, `id="item-S-2" class="pending"`) {
		t.Fatalf("first event:\n%s", first)
	}
	// Each part of the page is an event of its own, sent when it changes.
	_, body := get(t, srv.URL+"/events?once=1")
	for _, part := range []string{"live", "timeline", "dag", "cost", "items"} {
		if strings.Count(body, "event: "+part+"\n") != 1 {
			t.Errorf("the first message lacks the %s part:\n%s", part, body)
		}
	}
	st.Items["S-2"].Status = engine.ItemPassed
	writeState(t, p, st)
	if second := next(); !strings.Contains(second, `id="item-S-2" class="passed"`) {
		t.Fatalf("second event:\n%s", second)
	}
}

// ?once=1: one message, then the stream ends.
func TestEventsOnce(t *testing.T) {
	p, _ := fixture(t)
	srv := httptest.NewServer(New(p, "").Handler())
	defer srv.Close()
	done := make(chan string, 1)
	go func() {
		_, body := get(t, srv.URL+"/events?once=1")
		done <- body
	}()
	select {
	case body := <-done:
		if strings.Count(body, "event: live") != 1 {
			t.Fatalf("body:\n%s", body)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the stream did not end")
	}
}
