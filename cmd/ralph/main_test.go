package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/ralph-loop/ralph/internal/chattest"
	"github.com/ralph-loop/ralph/internal/cli"
	"github.com/ralph-loop/ralph/internal/ghtest"
	"github.com/ralph-loop/ralph/internal/proc"
	"github.com/ralph-loop/ralph/internal/testenv"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"ralph": func() { os.Exit(cli.Main()) },
	})
}

// TestScripts runs the end-to-end scripts in testdata/script: the real
// binary, real git, real processes, in a fresh $WORK each.
func TestScripts(t *testing.T) {
	goEnv := map[string]string{}
	for _, k := range []string{"GOCACHE", "GOMODCACHE", "GOPATH", "GOROOT"} {
		out, _ := exec.Command("go", "env", k).Output()
		goEnv[k] = strings.TrimSpace(string(out))
	}
	testscript.Run(t, testscript.Params{
		Dir: filepath.Join("..", "..", "testdata", "script"),
		Setup: func(env *testscript.Env) error {
			// HOME is outside $WORK, which the scripts' sandbox may write
			// (below): a writable home is refused.
			home, err := os.MkdirTemp("", "ralph-script-home-")
			if err != nil {
				return err
			}
			env.Defer(func() { os.RemoveAll(home) })
			env.Setenv("HOME", home)
			// Children's temp files and XDG dirs stay in $WORK too.
			if err := testenv.Isolate(filepath.Join(env.WorkDir, ".iso"), func(k, v string) error { env.Setenv(k, v); return nil }); err != nil {
				return err
			}
			for k, v := range goEnv {
				env.Setenv(k, v)
			}
			// The scripts' agents and gates leave marks for the script in
			// $WORK (outside their repository), which they find by $WORK:
			// the sandbox lets them, through the user's config
			// (sandbox_escapes.txtar replaces it).
			// The config home is outside $WORK, which some scripts make
			// the repository itself (its files would make the tree dirty).
			configHome, err := os.MkdirTemp("", "ralph-script-config-")
			if err != nil {
				return err
			}
			env.Defer(func() { os.RemoveAll(configHome) })
			env.Setenv("XDG_CONFIG_HOME", configHome)
			// The isolated dirs are no part of a repository made at $WORK:
			// git's default excludes file (XDG_CONFIG_HOME/git/ignore) says
			// so, or ralph's run key under XDG_STATE_HOME would be the
			// user's work.
			ignore := filepath.Join(configHome, "git", "ignore")
			if err := os.MkdirAll(filepath.Dir(ignore), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(ignore, []byte("/.iso/\n/.home/\n"), 0o644); err != nil {
				return err
			}
			userConfig := filepath.Join(configHome, "ralph", "config.yaml")
			if err := os.MkdirAll(filepath.Dir(userConfig), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(userConfig, []byte("sandbox:\n  writable: ["+strconv.Quote(env.WorkDir)+"]\n  env: [WORK]\n"), 0o644); err != nil {
				return err
			}
			env.Setenv("GOFLAGS", "-buildvcs=false")
			env.Setenv("GIT_AUTHOR_NAME", "Test")
			env.Setenv("GIT_AUTHOR_EMAIL", "test@example.com")
			env.Setenv("GIT_COMMITTER_NAME", "Test")
			env.Setenv("GIT_COMMITTER_EMAIL", "test@example.com")
			env.Setenv("GIT_CONFIG_NOSYSTEM", "1")
			// make test sets GORACE=atexit_sleep_ms=0: a race-enabled ralph
			// would otherwise sleep a second at every exit.
			if v, ok := os.LookupEnv("GORACE"); ok {
				env.Setenv("GORACE", v)
			}
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"waitfile":   cmdWaitFile,
			"pidgone":    cmdPidGone,
			"countlines": cmdCountLines,
			"webhook":    cmdWebhook,
			"ghserver":   cmdGHServer,
			"chatserver": cmdChatServer,
		},
		RequireExplicitExec: true,
	})
}

// waitfile PATH [SECONDS]: wait until PATH exists (a background ralph has
// reached a point the script wants to act at).
func cmdWaitFile(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 1 {
		ts.Fatalf("usage: waitfile PATH [SECONDS]")
	}
	limit := 30 * time.Second
	if len(args) > 1 {
		n, _ := strconv.Atoi(args[1])
		limit = time.Duration(n) * time.Second
	}
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(ts.MkAbs(args[0])); err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	ts.Fatalf("%s did not appear within %s", args[0], limit)
}

// pidgone PIDFILE: the process whose pid is in PIDFILE no longer exists
// (no orphan left behind by a killed agent).
func cmdPidGone(ts *testscript.TestScript, neg bool, args []string) {
	b, err := os.ReadFile(ts.MkAbs(args[0]))
	ts.Check(err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	ts.Check(err)
	deadline := time.Now().Add(5 * time.Second)
	for {
		if !proc.Alive(pid) {
			if neg {
				ts.Fatalf("process %d is gone", pid)
			}
			return
		}
		if neg || time.Now().After(deadline) {
			if !neg {
				ts.Fatalf("process %d is still alive", pid)
			}
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// countlines FILE PATTERN N: exactly N lines of FILE contain PATTERN.
func cmdCountLines(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 3 {
		ts.Fatalf("usage: countlines FILE SUBSTRING N")
	}
	data := ts.ReadFile(args[0])
	n := 0
	for _, l := range strings.Split(data, "\n") {
		if strings.Contains(l, args[1]) {
			n++
		}
	}
	want, _ := strconv.Atoi(args[2])
	if (n == want) == neg {
		ts.Fatalf("%s: %d lines contain %q, want %d", args[0], n, args[1], want)
	}
}

// webhook URLFILE LOGFILE [STATUS]: serve HTTP on loopback for the rest of
// the script; the URL goes to URLFILE, each request's method and body (one
// line) are appended to LOGFILE, and each is answered with STATUS (200).
func cmdWebhook(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 2 {
		ts.Fatalf("usage: webhook URLFILE LOGFILE [STATUS]")
	}
	status := http.StatusOK
	if len(args) > 2 {
		status, _ = strconv.Atoi(args[2])
	}
	var mu sync.Mutex
	logPath := ts.MkAbs(args[1])
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		f, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err == nil {
			f.Write([]byte(r.Method + " " + r.Header.Get("Content-Type") + " " + strings.ReplaceAll(string(b), "\n", " ") + "\n"))
			f.Close()
		}
		mu.Unlock()
		w.WriteHeader(status)
	}))
	ts.Defer(srv.Close)
	ts.Check(os.WriteFile(ts.MkAbs(args[0]), []byte(srv.URL), 0o644))
}

// chatServers are the scripts' scripted chats.
var chatServers sync.Map // *testscript.TestScript → *chattest.Server

// chatserver start | reply telegram|slack TEXT | message telegram TEXT |
// wait CHAT TEXT | sent FILE: a scripted chat (internal/chattest)
// speaking Telegram's Bot API and Slack's Web API; start sets $CHATURL
// (both api_urls) and $CHATID (the Telegram chat). reply answers the
// newest question sent there, message is a Telegram message of its own,
// wait waits until ralph sent TEXT there, sent writes what ralph sent
// (one JSON line each).
func cmdChatServer(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) == 0 {
		ts.Fatalf("usage: chatserver start|reply|message|sent")
	}
	if args[0] == "start" {
		srv := chattest.Start()
		ts.Defer(srv.Close)
		chatServers.Store(ts, srv)
		ts.Setenv("CHATURL", srv.URL())
		ts.Setenv("CHATID", strconv.Itoa(chattest.ChatID))
		return
	}
	v, ok := chatServers.Load(ts)
	if !ok {
		ts.Fatalf("chatserver: start it first")
	}
	srv := v.(*chattest.Server)
	switch {
	case (args[0] == "reply" || args[0] == "message") && len(args) == 3:
		ts.Check(srv.Reply(args[1], args[2], args[0] == "message"))
	case args[0] == "wait" && len(args) == 3:
		deadline := time.Now().Add(30 * time.Second)
		for {
			for _, m := range srv.Sent() {
				if m.Chat == args[1] && strings.Contains(m.Text, args[2]) {
					return
				}
			}
			if time.Now().After(deadline) {
				ts.Fatalf("nothing with %q was sent to %s", args[2], args[1])
			}
			time.Sleep(50 * time.Millisecond)
		}
	case args[0] == "sent" && len(args) == 2:
		var b strings.Builder
		for _, m := range srv.Sent() {
			line, _ := json.Marshal(m)
			b.Write(append(line, '\n'))
		}
		ts.Check(os.WriteFile(ts.MkAbs(args[1]), []byte(b.String()), 0o644))
	default:
		ts.Fatalf("usage: chatserver start|reply CHAT TEXT|message telegram TEXT|sent FILE")
	}
}

// ghServers are the scripts' scripted GitHub servers.
var ghServers sync.Map // *testscript.TestScript → *ghtest.Server

// ghserver start | issue TITLE BODYFILE [LABEL…] | pr HEAD BASE TITLE |
// requests FILE | state FILE:
// a scripted GitHub (internal/ghtest) for the rest of the script, which
// the real gh reaches through the environment start sets ($GHREMOTE is
// the repository's URL for `git remote add origin`); requests writes
// every request gh made (one line each: the GraphQL operation and its
// variables), state the issues and pull requests as JSON.
func cmdGHServer(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) == 0 {
		ts.Fatalf("usage: ghserver start|issue|requests|state")
	}
	if args[0] == "start" {
		dir := ts.MkAbs(".ghtest")
		ts.Check(os.MkdirAll(dir, 0o755))
		srv, err := ghtest.Start(dir, "acme", "widgets")
		ts.Check(err)
		ts.Defer(func() { srv.Close() })
		ghServers.Store(ts, srv)
		for _, kv := range srv.Env(filepath.Join(dir, "config")) {
			k, v, _ := strings.Cut(kv, "=")
			ts.Setenv(k, v)
		}
		ts.Setenv("GHREMOTE", srv.RemoteURL())
		return
	}
	v, ok := ghServers.Load(ts)
	if !ok {
		ts.Fatalf("ghserver: start it first")
	}
	srv := v.(*ghtest.Server)
	switch args[0] {
	case "issue":
		if len(args) < 3 {
			ts.Fatalf("usage: ghserver issue TITLE BODYFILE [LABEL…]")
		}
		srv.AddIssue(args[1], ts.ReadFile(args[2]), args[3:]...)
	case "pr":
		if len(args) != 4 {
			ts.Fatalf("usage: ghserver pr HEAD BASE TITLE")
		}
		srv.AddPR(args[1], args[2], args[3])
	case "requests":
		var b strings.Builder
		for _, r := range srv.Requests() {
			name := r.Operation
			if name == "" {
				name = r.Method + " " + r.Path
			}
			b.WriteString(name + " " + string(r.Variables) + "\n")
		}
		ts.Check(os.WriteFile(ts.MkAbs(args[1]), []byte(b.String()), 0o644))
	case "state":
		out, err := json.MarshalIndent(map[string]any{"issues": srv.Issues(), "pulls": srv.PRs()}, "", "  ")
		ts.Check(err)
		ts.Check(os.WriteFile(ts.MkAbs(args[1]), out, 0o644))
	default:
		ts.Fatalf("ghserver: unknown %q", args[0])
	}
}
