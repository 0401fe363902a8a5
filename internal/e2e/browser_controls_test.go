package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ralph-loop/ralph/internal/engine"
)

// cdp is a page of a headless Chromium driven through the DevTools
// protocol: the test clicks and types as a person would (mouse events at
// an element's place, text inserted where the focus is).
type cdp struct {
	t    *testing.T
	conn *websocket.Conn
	id   int
}

// startChromium starts a headless Chromium and opens its page.
func startChromium(ctx context.Context, t *testing.T) *cdp {
	t.Helper()
	profile, err := os.MkdirTemp("", "chromium-")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(chromium(t), "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-port=0",
		"--remote-allow-origins=*", "--user-data-dir="+profile, "--window-size=1200,900", "about:blank")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // its helpers go with it
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		for i := 0; i < 50 && os.RemoveAll(profile) != nil; i++ {
			time.Sleep(100 * time.Millisecond) // a helper still writing as it dies
		}
	})
	port := ""
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if m := regexp.MustCompile(`DevTools listening on ws://127\.0\.0\.1:(\d+)/`).FindStringSubmatch(sc.Text()); m != nil {
			port = m[1]
			break
		}
	}
	if port == "" {
		t.Fatal("chromium did not say where its DevTools listen")
	}
	go func() { // keep its stderr drained
		for sc.Scan() {
		}
	}()
	var targets []struct{ Type, WebSocketDebuggerURL string }
	waitFor(t, func() bool {
		resp, err := http.Get("http://127.0.0.1:" + port + "/json/list")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		return json.NewDecoder(resp.Body).Decode(&targets) == nil && len(targets) > 0
	})
	for _, tg := range targets {
		if tg.Type == "page" {
			conn, _, err := websocket.Dial(ctx, tg.WebSocketDebuggerURL, nil)
			if err != nil {
				t.Fatal(err)
			}
			conn.SetReadLimit(64 << 20)
			t.Cleanup(func() { conn.CloseNow() })
			return &cdp{t: t, conn: conn}
		}
	}
	t.Fatalf("no page among %v", targets)
	return nil
}

// call sends a DevTools command and returns its result.
func (c *cdp) call(method string, params any) json.RawMessage {
	c.t.Helper()
	c.id++
	ctx, cancel := context.WithTimeout(c.t.Context(), 30*time.Second)
	defer cancel()
	b, _ := json.Marshal(map[string]any{"id": c.id, "method": method, "params": params})
	if err := c.conn.Write(ctx, websocket.MessageText, b); err != nil {
		c.t.Fatalf("%s: %v", method, err)
	}
	for {
		_, msg, err := c.conn.Read(ctx)
		if err != nil {
			c.t.Fatalf("%s: %v", method, err)
		}
		var r struct {
			ID     int
			Result json.RawMessage
			Error  *struct{ Message string }
		}
		if json.Unmarshal(msg, &r) != nil || r.ID != c.id {
			continue // an event
		}
		if r.Error != nil {
			c.t.Fatalf("%s: %s", method, r.Error.Message)
		}
		return r.Result
	}
}

// eval is the value of a JavaScript expression in the page.
func (c *cdp) eval(expr string) any {
	c.t.Helper()
	var r struct{ Result struct{ Value any } }
	_ = json.Unmarshal(c.call("Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true}), &r)
	return r.Result.Value
}

// open loads url and waits until the page has loaded.
func (c *cdp) open(url string) {
	c.t.Helper()
	c.call("Page.navigate", map[string]any{"url": url})
	c.waitFor(`document.readyState === "complete" && location.href !== "about:blank"`)
}

// waitFor waits until a JavaScript condition holds in the page.
func (c *cdp) waitFor(cond string) {
	c.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for c.eval(cond) != true {
		if time.Now().After(deadline) {
			c.t.Fatalf("the page never had %s:\n%v", cond, c.eval("document.body && document.body.innerHTML"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// click clicks the element sel with the mouse, as a person does, once
// the page's live parts stopped changing: a live update above sel moves
// it, and a click aimed before the move lands elsewhere.
func (c *cdp) click(sel string) {
	c.t.Helper()
	c.waitFor(fmt.Sprintf("!!document.querySelector(%q)", sel))
	c.settle()
	pos, ok := c.eval(fmt.Sprintf(`(function(){var e=document.querySelector(%q);e.scrollIntoView({block:"center"});var r=e.getBoundingClientRect();return [r.left+r.width/2, r.top+r.height/2]})()`, sel)).([]any)
	if !ok || len(pos) != 2 {
		c.t.Fatalf("no place for %s", sel)
	}
	for _, typ := range []string{"mousePressed", "mouseReleased"} {
		c.call("Input.dispatchMouseEvent", map[string]any{"type": typ, "x": pos[0], "y": pos[1], "button": "left", "clickCount": 1})
	}
}

// settle waits until the page's live parts have not changed for 300 ms
// (its count of live updates), five seconds at most.
func (c *cdp) settle() {
	count := `document.body ? (document.body.dataset.updates || "0") : "0"`
	last, since := c.eval(count), time.Now()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if now := c.eval(count); now != last {
			last, since = now, time.Now()
		} else if time.Since(since) >= 300*time.Millisecond {
			return
		}
	}
}

// typeInto clicks the field sel and types text into it, as a person
// does, clicking again while the click did not give it the focus.
func (c *cdp) typeInto(sel, text string) {
	c.t.Helper()
	focused := fmt.Sprintf("document.activeElement === document.querySelector(%q)", sel)
	for try := 0; c.eval(focused) != true; try++ {
		if try == 10 {
			c.t.Fatalf("%s never took the focus", sel)
		}
		c.click(sel)
	}
	c.call("Input.insertText", map[string]any{"text": text})
	c.waitFor(fmt.Sprintf("document.querySelector(%q).value.includes(%q)", sel, text))
}

// TestBrowserControls: `ralph serve`, started before the run, in headless
// Chromium. A person clicks pause in the page, then types guidance into
// the form and sends it, then clicks resume: the run pauses after the
// iteration under way (its "paused" event), the guidance is recorded as
// the web dashboard's, reaches the next iteration's prompt, and its
// secret is masked in the page. Every effect is read from ralph's own
// files.
func TestBrowserControls(t *testing.T) {
	dir := newRepo(t, map[string]string{
		"prd.json":   `{"project":"web","branch_name":"ralph/web","quality_checks":{"test":"true"},"user_stories":[{"id":"S-1","title":"slow one","priority":1,"checks":["test -f S-1.txt"]},{"id":"S-2","title":"second","priority":2,"checks":["test -f S-2.txt"]}]}`,
		"agent.sh":   "cat > /dev/null\nif [ \"$RALPH_ITEM_ID\" = S-1 ]; then while [ ! -f go.flag ]; do sleep 0.1; done; fi\necho \"$RALPH_ITEM_ID\" > \"$RALPH_ITEM_ID.txt\"\necho 'GUIDANCE-ACK: g1'\necho '<promise>COMPLETE</promise>'\n",
		".gitignore": "go.flag\n",
	})
	p := engine.PathsFor(dir)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	self, _ := os.Executable()
	env := append(os.Environ(), asRalph+"=1", "GIT_AUTHOR_NAME=e2e", "GIT_AUTHOR_EMAIL=e2e@example.com", "GIT_COMMITTER_NAME=e2e", "GIT_COMMITTER_EMAIL=e2e@example.com")

	url := startServe(ctx, t, self, dir, env)

	run := exec.CommandContext(ctx, self, "run", "--plain", "--no-sandbox", "--agent", "cmd", "--agent-cmd", "sh agent.sh")
	run.Dir, run.Env = dir, env
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = os.WriteFile(filepath.Join(dir, "go.flag"), nil, 0o644); _ = run.Wait() }()
	events := func() string { b, _ := os.ReadFile(p.Events); return string(b) }
	waitFor(t, func() bool { return strings.Contains(events(), `"type":"iteration_started"`) })

	page := startChromium(ctx, t)
	page.open(url)
	page.waitFor(`!!document.querySelector("#item-S-1.running")`)
	if u := page.eval("location.href").(string); strings.Contains(u, "token") {
		t.Errorf("the token stayed in the address: %s", u)
	}

	// Pause: the iteration under way finishes, no new one starts.
	page.click("#pause")
	page.waitFor(`!!document.querySelector("#note") && document.querySelector("#note").textContent.includes("ralph pause done")`)
	if _, err := os.Stat(p.Pause); err != nil {
		t.Fatalf("pause clicked, no .ralph/pause: %v", err)
	}
	_ = os.WriteFile(filepath.Join(dir, "go.flag"), nil, 0o644)
	waitFor(t, func() bool { return strings.Contains(events(), `"type":"paused"`) })
	if strings.Contains(events(), `"item":"S-2"`) {
		t.Fatalf("S-2 began while paused:\n%s", events())
	}

	// Guidance, typed into the form.
	const key = "sk-ant-api03-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	page.typeInto("#guide-text", "keep the second story small; the key is "+key)
	page.click("#guide-send")
	page.waitFor(`!!document.querySelector("#guidance") && document.querySelector("#guidance").textContent.includes("keep the second story small")`)
	if html := page.eval("document.documentElement.outerHTML").(string); strings.Contains(html, key) || !strings.Contains(html, "[masked]") {
		t.Errorf("the page shows the secret:\n%s", html)
	}
	if !regexp.MustCompile(`"type":"guidance_given".*"by":"the web dashboard".*"id":"g1"`).MatchString(events()) {
		t.Fatalf("no guidance from the web dashboard in the events:\n%s", events())
	}

	// Resume: S-2 runs with the guidance in its prompt.
	page.click("#resume")
	if err := run.Wait(); err != nil {
		t.Fatalf("the run: %v\n%s", err, events())
	}
	ev := events()
	if !regexp.MustCompile(`"type":"iteration_started".*"item":"S-2".*"guidance":\["g1"\]`).MatchString(ev) || !strings.Contains(ev, `"type":"guidance_acknowledged"`) {
		t.Errorf("S-2 was not given the guidance:\n%s", ev)
	}
	tr, _ := os.ReadFile(filepath.Join(p.Transcripts, "0002-S-2.log"))
	if !strings.Contains(string(tr), "## Guidance from a person") || !strings.Contains(string(tr), "- [g1] keep the second story small; the key is [masked]") || strings.Contains(string(tr), key) {
		t.Errorf("S-2's prompt:\n%s", tr)
	}
}

// The web dashboard's retry control reopens a blocked story: a POST with
// the token runs `ralph retry ID` in the server, and the next `ralph run`
// passes the story.
func TestWebRetryControl(t *testing.T) {
	// The person's fix is outside the repository: a file ralph did not
	// see before the run, inside it, would be set aside while the gates run.
	fixed := filepath.Join(t.TempDir(), "fixed.flag")
	dir := newRepo(t, map[string]string{
		"prd.json": `{"project":"web","branch_name":"ralph/web","quality_checks":{"test":"[ ! -f S-1.txt ] || test -f ` + fixed + `"},"user_stories":[{"id":"S-1","title":"needs a fix","priority":1,"checks":["test -f S-1.txt"]}]}`,
		"agent.sh": "cat > /dev/null\necho done > S-1.txt\necho '<promise>COMPLETE</promise>'\n",
	})
	p := engine.PathsFor(dir)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	self, _ := os.Executable()
	env := append(os.Environ(), asRalph+"=1", "GIT_AUTHOR_NAME=e2e", "GIT_AUTHOR_EMAIL=e2e@example.com", "GIT_COMMITTER_NAME=e2e", "GIT_COMMITTER_EMAIL=e2e@example.com")
	ralph := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, self, args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := ralph("run", "--plain", "--no-sandbox", "--max-attempts", "1", "--agent", "cmd", "--agent-cmd", "sh agent.sh"); err == nil || !strings.Contains(out, "S-1 blocked") {
		t.Fatalf("the first run should block S-1 (%v):\n%s", err, out)
	}

	base, token, _ := strings.Cut(startServe(ctx, t, self, dir, env), "?token=")
	post := func(id string) (int, string) {
		req, _ := http.NewRequestWithContext(ctx, "POST", strings.TrimSuffix(base, "/")+"/api/control/retry", strings.NewReader("id="+id))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		_, _ = bufio.NewReader(resp.Body).WriteTo(&b)
		return resp.StatusCode, b.String()
	}
	if code, body := post("S-9"); code < 400 || !strings.Contains(body, "S-9") {
		t.Fatalf("retry of an unknown story: %d %s", code, body)
	}
	if code, body := post("S-1"); code != http.StatusOK {
		t.Fatalf("retry of S-1: %d %s", code, body)
	}
	st, err := engine.LoadState(p.State)
	if err != nil || st.Items["S-1"] == nil || st.Items["S-1"].Status != engine.ItemPending {
		t.Fatalf("S-1 after the retry control: %+v %v", st.Items["S-1"], err)
	}
	if b, _ := os.ReadFile(p.Events); !strings.Contains(string(b), `"type":"item_retried"`) {
		t.Fatalf("no item_retried event:\n%s", b)
	}
	_ = os.WriteFile(fixed, nil, 0o644)
	if out, err := ralph("run", "--plain", "--no-sandbox", "--max-attempts", "1", "--agent", "cmd", "--agent-cmd", "sh agent.sh"); err != nil || !strings.Contains(out, "all 1 story passed") {
		t.Fatalf("the run after the retry (%v):\n%s", err, out)
	}
}

// startServe starts `ralph serve` on a free loopback port in dir (ended
// with the test) and returns the URL it printed, token included.
func startServe(ctx context.Context, t *testing.T, self, dir string, env []string) string {
	t.Helper()
	serve := exec.CommandContext(ctx, self, "serve", "--addr", "127.0.0.1:0")
	serve.Dir, serve.Env = dir, env
	out, _ := serve.StdoutPipe()
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = serve.Process.Kill(); _ = serve.Wait() })
	url, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.Contains(url, "?token=") {
		t.Fatalf("ralph serve printed %q: %v", url, err)
	}
	return strings.TrimSpace(url)
}
