package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ralph-loop/ralph/internal/agent"
	"github.com/ralph-loop/ralph/internal/cli"
	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/llmtest"
	"github.com/ralph-loop/ralph/internal/testenv"
)

// asRalph makes the test binary act as the ralph command: the tests run
// ralph as a real process (its own environment, its own signal handling,
// agent process groups) without a separate `go build`.
const asRalph = "RALPH_E2E_AS_RALPH"

func TestMain(m *testing.M) {
	if os.Getenv(asRalph) == "1" {
		os.Exit(cli.Main())
	}
	os.Exit(testenv.Main(m))
}

// runResult is one finished `ralph` process.
type runResult struct {
	code     int
	stdout   string
	stderr   string
	duration time.Duration
}

func (r runResult) String() string {
	return "exit " + itoa(r.code) + "\n--- stdout\n" + tail(r.stdout, 4000) + "\n--- stderr\n" + tail(r.stderr, 6000)
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// ralph runs `ralph ARGS…` in dir with the inherited environment plus env
// (KEY=VALUE, later wins) and a fixed git identity.
func ralph(t *testing.T, dir string, env []string, args ...string) runResult {
	t.Helper()
	return ralphWithin(t, 3*time.Minute, dir, env, args...)
}

// ralphWithin is ralph with another time limit than 3 minutes.
func ralphWithin(t *testing.T, limit time.Duration, dir string, env []string, args ...string) runResult {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, self, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		asRalph+"=1",
		"GIT_AUTHOR_NAME=ralph e2e", "GIT_AUTHOR_EMAIL=e2e@example.com",
		"GIT_COMMITTER_NAME=ralph e2e", "GIT_COMMITTER_EMAIL=e2e@example.com",
	)
	cmd.Env = append(cmd.Env, env...)
	cmd.WaitDelay = 10 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err = cmd.Run()
	res := runResult{stdout: stdout.String(), stderr: stderr.String(), duration: time.Since(start)}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		res.code = ee.ExitCode()
	default:
		t.Fatalf("ralph %v: %v\n%s", args, err, res)
	}
	if ctx.Err() != nil {
		t.Fatalf("ralph %v did not finish in time\n%s", args, res)
	}
	return res
}

// requireCLI skips (or, with RALPH_REQUIRE_AGENTS=1, fails) when the agent
// CLI is not installed.
func requireCLI(t *testing.T, bin string) {
	t.Helper()
	if testing.Short() {
		t.Skip("real agent CLIs: skipped with -short")
	}
	if _, err := agent.FindAgentBinary(bin); err != nil {
		msg := bin + " is not installed in " + agent.AgentsBinDir() + " or $PATH; run scripts/install-agents.sh " + bin
		if os.Getenv("RALPH_REQUIRE_AGENTS") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"GIT_AUTHOR_NAME=ralph e2e", "GIT_AUTHOR_EMAIL=e2e@example.com",
		"GIT_COMMITTER_NAME=ralph e2e", "GIT_COMMITTER_EMAIL=e2e@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// newRepo makes a git repository on main with files committed, and
// returns its path with symlinks resolved (the path the CLIs see as cwd).
func newRepo(t *testing.T, files map[string]string) string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	git(t, dir, "init", "-q", "-b", "main")
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-qm", "initial")
	return dir
}

// startServer starts the scripted LLM server, logging to a file kept with
// the test's temp files.
func startServer(t *testing.T, script *llmtest.Script) *llmtest.Server {
	t.Helper()
	srv, err := llmtest.Start(script, filepath.Join(t.TempDir(), "requests.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv
}

func loadState(t *testing.T, dir string) *engine.State {
	t.Helper()
	st, err := engine.LoadState(filepath.Join(dir, ".ralph", "state.json"))
	if err != nil || st == nil {
		t.Fatalf("state.json: %v", err)
	}
	return st
}

func loadEvents(t *testing.T, dir string) []engine.Event {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, ".ralph", "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var evs []engine.Event
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev engine.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("events.jsonl: %v: %s", err, sc.Bytes())
		}
		evs = append(evs, ev)
	}
	return evs
}

func eventsOf(evs []engine.Event, typ string) []engine.Event {
	var out []engine.Event
	for _, ev := range evs {
		if ev.Type == typ {
			out = append(out, ev)
		}
	}
	return out
}

// transcripts returns the concatenated transcripts of an item.
func transcripts(t *testing.T, dir, item string) string {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(dir, ".ralph", "transcripts", "*-"+item+"*.log"))
	var b strings.Builder
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString("==> " + filepath.Base(p) + "\n")
		b.Write(data)
	}
	return b.String()
}

// featureLog is `git log --format=%s main..branch`, newest first.
func featureLog(t *testing.T, dir, branch string) []string {
	t.Helper()
	out := git(t, dir, "log", "--format=%s", "main.."+branch)
	if out == "" {
		return nil
	}
	return strings.Split(out, "\n")
}

// promptRequests are the model requests that start an agent run on item
// (no assistant turn yet), recognised by the prompt's "## Your story: ID".
func promptRequests(srv *llmtest.Server, item string) []llmtest.LoggedRequest {
	var out []llmtest.LoggedRequest
	for _, r := range srv.Requests() {
		if r.Side || r.AssistantTurns != 0 || r.Step != 0 {
			continue
		}
		if strings.Contains(string(r.Body), "Your story: "+item) {
			out = append(out, r)
		}
	}
	return out
}

func faults(srv *llmtest.Server) int {
	n := 0
	for _, r := range srv.Requests() {
		if r.Fault {
			n++
		}
	}
	return n
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// sandboxWritable is the environment entry (XDG_CONFIG_HOME) of a user
// config that lets the sandboxed agents and gates write dirs too, and
// see the variables the tests give them ($MARK, $REMOTE, $COORD), for
// tests whose agents and gates leave marks outside their repository or
// read its git remote: the sandbox's /tmp is its own, and its
// environment is built from an allowlist.
func sandboxWritable(t *testing.T, dirs ...string) string {
	t.Helper()
	home := t.TempDir()
	cfg := filepath.Join(home, "ralph", "config.yaml")
	if err := os.MkdirAll(filepath.Dir(cfg), 0o755); err != nil {
		t.Fatal(err)
	}
	var quoted []string
	for _, d := range dirs {
		quoted = append(quoted, strconv.Quote(d))
	}
	if err := os.WriteFile(cfg, []byte("sandbox:\n  writable: ["+strings.Join(quoted, ", ")+"]\n  env: [MARK, REMOTE, COORD]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return "XDG_CONFIG_HOME=" + home
}
