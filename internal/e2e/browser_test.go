package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/web"
)

// chromium is the headless browser of the tests (Debian's package; make
// check installs it when missing).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("chromium is not installed (make check installs it: scripts/install-tools.sh)")
	return ""
}

// TestBrowserDashboard: headless Chromium loads `ralph serve`'s page
// while a scripted run goes on. The page is rendered with S-1 running; the
// event stream is answered once S-1 has passed, so the DOM Chromium dumps
// shows the status change that arrived over server-sent events. A
// screenshot is saved ($RALPH_SCREENSHOT, else the test's folder).
func TestBrowserDashboard(t *testing.T) {
	browser := chromium(t)
	dir := newRepo(t, map[string]string{
		"prd.json":   `{"project":"web","branch_name":"ralph/web","quality_checks":{"test":"true"},"user_stories":[{"id":"S-1","title":"slow one","priority":1,"checks":["test -f S-1.txt"]},{"id":"S-2","title":"second","priority":2,"depends_on":["S-1"],"checks":["test -f S-2.txt"]}]}`,
		"agent.sh":   "cat > /dev/null\nif [ \"$RALPH_ITEM_ID\" = S-1 ]; then while [ ! -f go.flag ]; do sleep 0.1; done; fi\necho \"$RALPH_ITEM_ID\" > \"$RALPH_ITEM_ID.txt\"\necho working\necho '<promise>COMPLETE</promise>'\n",
		".gitignore": "go.flag\n",
	})
	p := engine.PathsFor(dir)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	self, _ := os.Executable()
	run := exec.CommandContext(ctx, self, "run", "--plain", "--agent", "cmd", "--agent-cmd", "sh agent.sh")
	run.Dir = dir
	run.Env = append(os.Environ(), asRalph+"=1", "GIT_AUTHOR_NAME=e2e", "GIT_AUTHOR_EMAIL=e2e@example.com", "GIT_COMMITTER_NAME=e2e", "GIT_COMMITTER_EMAIL=e2e@example.com")
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = os.WriteFile(filepath.Join(dir, "go.flag"), nil, 0o644); _ = run.Wait() }()
	waitFor(t, func() bool {
		st, _ := engine.LoadState(p.State)
		return st != nil && st.Items["S-1"] != nil && st.Items["S-1"].Status == engine.ItemRunning
	})

	// The event stream waits for S-1 to pass: the agent is released when
	// the page has loaded and the browser asks for events.
	var once sync.Once
	h := web.New(p, "").Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/events" {
			once.Do(func() {
				_ = os.WriteFile(filepath.Join(dir, "go.flag"), nil, 0o644)
				waitFor(t, func() bool {
					st, _ := engine.LoadState(p.State)
					return st != nil && st.Items["S-1"].Status == engine.ItemPassed
				})
			})
		}
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()

	page := srv.URL + "/?once=1"
	out, err := exec.CommandContext(ctx, browser, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", "--virtual-time-budget=15000", page).Output()
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	dom := string(out)
	for _, want := range []string{`id="item-S-1" class="passed"`, `id="item-S-2"`, `data-updates="`, "Items", "<td>L2</td><td>S-1</td>"} {
		if !strings.Contains(dom, want) {
			t.Errorf("the DOM lacks %q:\n%s", want, dom)
		}
	}
	shot := os.Getenv("RALPH_SCREENSHOT")
	if shot == "" {
		shot = filepath.Join(t.TempDir(), "dashboard.png")
	}
	if out, err := exec.CommandContext(ctx, browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1000,640", "--virtual-time-budget=3000", "--screenshot="+shot, page).CombinedOutput(); err != nil {
		t.Fatalf("screenshot: %v\n%s", err, out)
	}
	if st, err := os.Stat(shot); err != nil || st.Size() < 1000 {
		t.Errorf("screenshot %s: %v", shot, err)
	}
}

// TestServeTokenOffLoopback: bound to a non-loopback address, ralph serve
// prints a URL with a generated token and refuses requests without it,
// the event stream included.
func TestServeTokenOffLoopback(t *testing.T) {
	dir := newRepo(t, map[string]string{"README.md": "x\n"})
	self, _ := os.Executable()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	cmd := exec.CommandContext(ctx, self, "serve", "--addr", "0.0.0.0:0")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), asRalph+"=1")
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = cmd.Wait() }()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	url := strings.Replace(strings.TrimSpace(line), "0.0.0.0", "127.0.0.1", 1)
	base, token, ok := strings.Cut(url, "?token=")
	if !ok || len(token) < 16 {
		t.Fatalf("no token in %q", line)
	}
	for _, path := range []string{"", "events", "transcript/1"} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("/%s without the token: %d", path, resp.StatusCode)
		}
	}
	// Attack: a DNS-rebinding page holds no token; nor does a request
	// with the token under a foreign name get through.
	req, _ := http.NewRequest("GET", url, nil)
	req.Host = "rebind.evil.example"
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("a rebinding Host with the token: %v %v", err, resp)
	}
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), "No run yet") || resp.Request.URL.RawQuery != "" {
		t.Errorf("with the token: %d %s (at %s)", resp.StatusCode, b, resp.Request.URL)
	}
	// The cookie it set opens the event stream.
	if resp, err := c.Get(base + "events?once=1"); err != nil || resp.StatusCode != 200 {
		t.Errorf("events with the cookie: %v %v", err, resp)
	}
}

// waitFor polls ok until it holds. The bound is wide: under `make
// check`'s load a coordinator's start alone (its NATS server, the
// baseline gates on the untouched base) has taken half a minute, and a
// wait that gives up while the run still makes progress says nothing.
func waitFor(t *testing.T, ok func() bool, logs ...fmt.Stringer) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for !ok() {
		if time.Now().After(deadline) {
			var b strings.Builder
			for _, l := range logs {
				if p, ok := l.(*bgProc); ok {
					p.dumpStacks()
				}
				b.WriteString("\n---\n" + l.String())
			}
			t.Fatal("timed out waiting" + b.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
