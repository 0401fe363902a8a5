package sandbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ralph-loop/ralph/internal/proc"
)

// The test binary is also the sandboxes' init (as ralph's binary is).
func TestMain(m *testing.M) {
	RunInitIfAsked(os.Args)
	os.Exit(m.Run())
}

func TestHostOf(t *testing.T) {
	for in, want := range map[string]string{
		"https://api.anthropic.com":         "api.anthropic.com:443",
		"http://127.0.0.1:8080/v1":          "127.0.0.1:8080",
		"http://localhost":                  "localhost:80",
		"HTTPS://User:pw@Example.COM/x?y#z": "example.com:443",
		"api.openai.com":                    "api.openai.com:443",
		"http://[::1]:9/":                   "[::1]:9",
		"":                                  "",
	} {
		if got := HostOf(in); got != want {
			t.Errorf("HostOf(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestAllowlist(t *testing.T) {
	a := newAllowlist([]string{"registry.npmjs.org", "http://127.0.0.1:4000", "proxy.golang.org:443"})
	for hp, want := range map[string]bool{
		"registry.npmjs.org:443": true, "registry.npmjs.org:80": true, "REGISTRY.npmjs.org:443": true,
		"127.0.0.1:4000": true, "127.0.0.1:4001": false, "proxy.golang.org:443": true, "proxy.golang.org:80": false,
		"evil.example:443": false, "npmjs.org:443": false,
	} {
		if got := a.allows(hp); got != want {
			t.Errorf("allows(%q) = %v, want %v", hp, got, want)
		}
	}
	if got := a.loopback(); len(got) != 1 || got[0] != "127.0.0.1:4000" {
		t.Errorf("loopback = %q", got)
	}
}

// fixture is a home with credentials and dotfiles, a repository with a
// linked worktree, a state folder inside it and a folder outside.
type fixture struct {
	home, repo, tree, outside string
	sb                        *Sandbox
}

func newFixture(t *testing.T, p Policy) *fixture {
	t.Helper()
	if _, err := Bwrap(); err != nil {
		t.Fatal(err) // the sandbox is on by default: its tests fail, never skip
	}
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{home: filepath.Join(base, "home"), repo: filepath.Join(base, "repo"), tree: filepath.Join(base, "tree"), outside: filepath.Join(base, "outside")}
	for _, d := range []string{filepath.Join(f.home, ".ssh"), f.repo, f.outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(t, filepath.Join(f.home, ".ssh", "id_rsa"), "PRIVATE KEY\n")
	write(t, filepath.Join(f.home, ".bashrc"), "# mine\n")
	write(t, filepath.Join(f.home, ".netrc"), "machine x password y\n")
	t.Setenv("HOME", f.home)
	git(t, f.repo, "init", "-q", "-b", "main")
	write(t, filepath.Join(f.repo, "a.txt"), "a\n")
	git(t, f.repo, "add", "-A")
	git(t, f.repo, "commit", "-qm", "init")
	git(t, f.repo, "worktree", "add", "-q", "-b", "item", f.tree)
	write(t, filepath.Join(f.repo, ".ralph", "state.json"), "{}\n")
	p.Protect = append(p.Protect, filepath.Join(f.repo, ".ralph"))
	if p.Caches == nil {
		p.Caches = []string{}
	}
	sb, err := New(p)
	if err != nil {
		t.Fatal(err)
	}
	f.sb = sb
	return f
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func git(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_NOSYSTEM=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

// sh runs script confined by ss in dir and returns its output and exit code.
func sh(t *testing.T, ctx context.Context, ss *Session, dir, script string) (string, int) {
	t.Helper()
	var out strings.Builder
	env := append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	res, err := proc.Exec{}.Run(proc.WithConfiner(ctx, ss), proc.Cmd{Argv: []string{"sh", "-c", script}, Dir: dir, Env: env, Stdout: &out, Stderr: &out, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatalf("%s: %v", script, err)
	}
	return out.String(), res.ExitCode
}

// TestFilesystem: in a linked worktree the agent writes its tree and
// commits on its branch; everything else fails.
func TestFilesystem(t *testing.T) {
	f := newFixture(t, Policy{})
	ss, err := f.sb.Open(Use{Label: "test", Dir: f.tree, Network: NetNone})
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	ctx := context.Background()
	if out, code := sh(t, ctx, ss, f.tree, `set -e
echo b > b.txt
git add b.txt
git commit -qm b
t=$(mktemp); echo x > "$t"
echo ok`); code != 0 || !hasLine(out, "ok") {
		t.Fatalf("writing the tree and committing failed (exit %d):\n%s", code, out)
	}
	common := filepath.Join(f.repo, ".git")
	for what, script := range map[string]string{
		"outside":         "echo x > " + filepath.Join(f.outside, "x"),
		"dotfile":         "echo x >> " + filepath.Join(f.home, ".bashrc"),
		"new dotfile":     "echo x > " + filepath.Join(f.home, ".profile"),
		".git/config":     "echo x >> " + filepath.Join(common, "config"),
		".git/hooks":      "echo x > " + filepath.Join(common, "hooks", "post-commit"),
		".git/info":       "echo x > " + filepath.Join(common, "info", "attributes"),
		".ralph":          "echo x > " + filepath.Join(f.repo, ".ralph", "state.json"),
		"the .git file":   "echo x > .git",
		"ssh key":         "cat " + filepath.Join(f.home, ".ssh", "id_rsa"),
		"netrc":           "grep -q password " + filepath.Join(f.home, ".netrc"),
		"other worktrees": "echo x > " + filepath.Join(common, "worktrees", "x"),
		"alternates":      "echo /elsewhere > " + filepath.Join(common, "objects", "info", "alternates"),
		"packed-refs":     "echo x >> " + filepath.Join(common, "packed-refs"),
		"the main HEAD":   "echo x > " + filepath.Join(common, "HEAD"),
		"the main index":  "echo x > " + filepath.Join(common, "index"),
	} {
		if out, code := sh(t, ctx, ss, f.tree, script); code == 0 {
			t.Errorf("%s: %q succeeded in the sandbox:\n%s", what, script, out)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(f.home, ".bashrc")); string(b) != "# mine\n" {
		t.Errorf("~/.bashrc changed: %q", b)
	}
	// The main tree is in the temp folder: the sandbox's own /tmp is
	// private, so the write lands there, never in the tree.
	sh(t, ctx, ss, f.tree, "echo x > "+filepath.Join(f.repo, "x"))
	for _, p := range []string{filepath.Join(f.outside, "x"), filepath.Join(common, "hooks", "post-commit"), filepath.Join(common, "info", "attributes"),
		filepath.Join(f.repo, "x"), filepath.Join(common, "objects", "info", "alternates")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s was written", p)
		}
	}
	// The native agent's file tools ask the same question.
	for p, want := range map[string]bool{
		filepath.Join(f.tree, "c.txt"):                   true,
		filepath.Join(common, "config"):                  false,
		filepath.Join(common, "hooks", "pre-commit"):     false,
		filepath.Join(f.repo, ".ralph", "x"):             false,
		filepath.Join(f.outside, "x"):                    false,
		filepath.Join(common, "objects", "ab", "cdef"):   true,
		filepath.Join(f.home, ".ssh", "authorized_keys"): false,
	} {
		if got := ss.MayWrite(p); got != want {
			t.Errorf("MayWrite(%s) = %v, want %v", p, got, want)
		}
	}
}

// TestProcessesEndWithTheSandbox: a timeout ends the command and all it
// started, setsid or not.
func TestProcessesEndWithTheSandbox(t *testing.T) {
	f := newFixture(t, Policy{})
	ss, err := f.sb.Open(Use{Label: "test", Dir: f.tree, Network: NetNone})
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	marker := fmt.Sprintf("sleep %d", 4000+os.Getpid()%1000)
	start := time.Now()
	res, err := proc.Exec{Grace: 200 * time.Millisecond}.Run(proc.WithConfiner(context.Background(), ss), proc.Cmd{
		Argv: []string{"sh", "-c", "setsid sh -c 'exec " + marker + "' >/dev/null 2>&1 & exec " + marker}, Dir: f.tree, Timeout: 300 * time.Millisecond,
	})
	if err != nil || !res.TimedOut {
		t.Fatalf("res %+v, err %v: want a timeout", res, err)
	}
	if time.Since(start) > 10*time.Second {
		t.Errorf("the timeout took %s", time.Since(start))
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		running, _ := proc.Running(func(argv []string) bool { return strings.Join(argv, " ") == marker })
		if !running {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%q still runs after its sandbox ended", marker)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestNetwork: with NetProxy the allowed host is reached through the proxy
// (and, on loopback, at its own address); any other host is denied and
// recorded; with NetNone nothing is reached.
func TestNetwork(t *testing.T) {
	var allowedHits, forbiddenHits atomic.Int32
	allowed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		allowedHits.Add(1)
		io.WriteString(w, "model says hi\n")
	}))
	defer allowed.Close()
	forbidden := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { forbiddenHits.Add(1) }))
	defer forbidden.Close()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("curl is needed (scripts/install-tools.sh installs it)")
	}
	f := newFixture(t, Policy{})
	state := t.TempDir()
	f.sb.RecordDir = state
	ss, err := f.sb.Open(Use{Label: "agent test", Dir: f.tree, Network: NetProxy, Hosts: []string{allowed.URL}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if out, code := sh(t, ctx, ss, f.tree, "curl -sf -m 10 "+allowed.URL+"/v1"); code != 0 || !strings.Contains(out, "model says hi") {
		t.Errorf("the allowed host through the proxy: exit %d\n%s", code, out)
	}
	if out, code := sh(t, ctx, ss, f.tree, "curl -sf -m 10 --noproxy '*' "+allowed.URL+"/v1"); code != 0 || !strings.Contains(out, "model says hi") {
		t.Errorf("the allowed loopback host at its own address: exit %d\n%s", code, out)
	}
	if out, code := sh(t, ctx, ss, f.tree, "curl -sf -m 10 "+forbidden.URL); code == 0 {
		t.Errorf("a forbidden host through the proxy was reached:\n%s", out)
	}
	if out, code := sh(t, ctx, ss, f.tree, "curl -sf -m 10 --noproxy '*' "+forbidden.URL); code == 0 {
		t.Errorf("a forbidden host was reached directly:\n%s", out)
	}
	if out, code := sh(t, ctx, ss, f.tree, "curl -sf -m 10 -p "+forbidden.URL); code == 0 {
		t.Errorf("a forbidden host was reached through a CONNECT tunnel:\n%s", out)
	}
	host := strings.TrimPrefix(forbidden.URL, "http://")
	if d := ss.Denied(); len(d) != 1 || !strings.HasPrefix(d[0], host) {
		t.Errorf("denied = %q, want %s", d, host)
	}
	ss.Close()
	if allowedHits.Load() != 2 || forbiddenHits.Load() != 0 {
		t.Errorf("hits: allowed %d (want 2), forbidden %d (want 0)", allowedHits.Load(), forbiddenHits.Load())
	}
	rec := ReadRecord(state)
	if rec == nil || len(rec.Denied) != 1 || rec.Denied[0].Host != host || rec.Denied[0].By != "agent test" || rec.Denied[0].Count != 2 {
		t.Errorf("record = %+v", rec)
	}

	none, err := f.sb.Open(Use{Label: "gate", Dir: f.tree, Network: NetNone})
	if err != nil {
		t.Fatal(err)
	}
	defer none.Close()
	if out, code := sh(t, ctx, none, f.tree, "curl -sf -m 10 --noproxy '*' "+allowed.URL); code == 0 {
		t.Errorf("no network, yet the host was reached:\n%s", out)
	}
}

// TestProxyKeepAlive: a kept-alive proxy connection never carries a
// second request to another host.
func TestProxyKeepAlive(t *testing.T) {
	var forbiddenHits atomic.Int32
	allowed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer allowed.Close()
	forbidden := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { forbiddenHits.Add(1) }))
	defer forbidden.Close()
	var denied []string
	g := &gateway{allow: newAllowlist([]string{allowed.URL}), denied: func(h string) { denied = append(denied, h) }}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g.serveProxy(ln)
	defer g.close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET %s/ HTTP/1.1\r\nHost: %s\r\n\r\nGET %s/ HTTP/1.1\r\nHost: %s\r\n\r\n",
		allowed.URL, strings.TrimPrefix(allowed.URL, "http://"), forbidden.URL, strings.TrimPrefix(forbidden.URL, "http://"))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != 200 {
		t.Errorf("status %d", resp.StatusCode)
	}
	if _, err := http.ReadResponse(br, nil); err == nil || forbiddenHits.Load() != 0 {
		t.Errorf("a second request on the same connection went through (err %v, forbidden hits %d)", err, forbiddenHits.Load())
	}
}

func TestUnavailable(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := probe()
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "apt-get install bubblewrap") || !strings.Contains(err.Error(), "--no-sandbox") {
		t.Errorf("err = %v, want the install hint and --no-sandbox", err)
	}
}

// TestOrphanSessionsRemoved: a session folder whose ralph was killed is
// removed by the next sandbox; a live one's stays.
func TestOrphanSessionsRemoved(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	orphan := filepath.Join(socketRoot(), fmt.Sprintf("%s%d-1", sessionPrefix, dead.Process.Pid))
	live := filepath.Join(socketRoot(), fmt.Sprintf("%s%d-2", sessionPrefix, os.Getpid()))
	for _, d := range []string{orphan, live} {
		if err := os.MkdirAll(filepath.Join(d, "tmp"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := New(Policy{Caches: []string{}}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(orphan); err == nil {
		t.Errorf("the orphan %s is still there", orphan)
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("the live session's folder went: %v", err)
	}
}
