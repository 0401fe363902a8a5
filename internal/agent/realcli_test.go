package agent

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ralph-loop/ralph/internal/llmtest"
	"github.com/ralph-loop/ralph/internal/proc"
	"github.com/ralph-loop/ralph/internal/sandbox"
	"github.com/ralph-loop/ralph/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// These tests run the real agent CLIs (installed by scripts/install-agents.sh
// into $RALPH_AGENTS_DIR, default ~/.cache/ralph/agents) against the scripted
// LLM server in a temp git repo. A missing CLI skips its test unless
// RALPH_REQUIRE_AGENTS=1.

type realCLI struct {
	name string
	bin  string
	// writeCall is the CLI's own tool call that creates dir/hello.txt.
	writeCall func(dir string) llmtest.ToolCall
}

func toolCall(name string, input map[string]any) llmtest.ToolCall {
	b, _ := json.Marshal(input)
	return llmtest.ToolCall{Name: name, Input: b}
}

var realCLIs = []realCLI{
	{"claude", "claude", func(dir string) llmtest.ToolCall {
		return toolCall("Write", map[string]any{"file_path": filepath.Join(dir, "hello.txt"), "content": "hello\n"})
	}},
	{"codex", "codex", func(dir string) llmtest.ToolCall {
		return toolCall("exec_command", map[string]any{"cmd": "printf 'hello\\n' > hello.txt", "login": false})
	}},
	{"opencode", "opencode", func(dir string) llmtest.ToolCall {
		return toolCall("write", map[string]any{"filePath": filepath.Join(dir, "hello.txt"), "content": "hello\n"})
	}},
	{"gemini", "gemini", func(dir string) llmtest.ToolCall {
		return toolCall("write_file", map[string]any{"file_path": filepath.Join(dir, "hello.txt"), "content": "hello\n"})
	}},
	{"copilot", "copilot", func(dir string) llmtest.ToolCall {
		return toolCall("create", map[string]any{"path": filepath.Join(dir, "hello.txt"), "file_text": "hello\n"})
	}},
}

func requireCLI(t *testing.T, bin string) {
	t.Helper()
	if _, err := FindAgentBinary(bin); err != nil {
		msg := bin + " is not installed in " + AgentsBinDir() + " or $PATH; run scripts/install-agents.sh"
		if os.Getenv("RALPH_REQUIRE_AGENTS") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
}

func gitRepo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("git", "init", "-q", dir).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	// Resolve symlinks so the paths the tools write match the CLIs' cwd.
	if d, err := filepath.EvalSymlinks(dir); err == nil {
		dir = d
	}
	return dir
}

// runReal starts the scripted server and runs the named adapter once.
func runReal(t *testing.T, c realCLI, dir string, script *llmtest.Script) (Result, string, error) {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "requests.jsonl")
	srv, err := llmtest.Start(script, logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	a, err := New(c.name, Options{BaseURL: srv.URL()})
	if err != nil {
		t.Fatal(err)
	}
	zero := 0
	a.(interface{ cli() *cliBase }).cli().MaxRetries = &zero
	// In the sandbox, as ralph runs every agent: the CLI reaches the
	// server through the sandbox's proxy (or its own loopback's forward).
	sb, err := sandbox.New(sandbox.Policy{})
	if err != nil {
		t.Fatal(err) // the sandbox is on by default: never skipped
	}
	ss, err := sb.Open(sandbox.Use{Label: "agent " + c.name, Dir: dir, Network: sandbox.NetProxy, Hosts: []string{srv.URL()}, State: sandbox.StateDirs(c.name)})
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	var transcript bytes.Buffer
	start := time.Now()
	res, err := a.Run(proc.WithConfiner(t.Context(), ss), Request{
		Prompt:     "Create hello.txt containing hello, then say done.",
		Dir:        dir,
		Timeout:    90 * time.Second,
		Transcript: &transcript,
	})
	t.Logf("%s ran in %v (exit %d), %d requests", c.name, time.Since(start).Round(time.Millisecond), res.ExitCode, len(srv.Requests()))
	return res, transcript.String(), err
}

func TestRealCLIWritesFile(t *testing.T) {
	if testing.Short() {
		t.Skip("real agent CLIs: skipped with -short")
	}
	for _, c := range realCLIs {
		t.Run(c.name, func(t *testing.T) {
			requireCLI(t, c.bin)
			dir := gitRepo(t)
			script := &llmtest.Script{Steps: []llmtest.Step{
				{ToolCalls: []llmtest.ToolCall{c.writeCall(dir)}},
				{Text: "done <promise>COMPLETE</promise>"},
			}}
			res, transcript, err := runReal(t, c, dir, script)
			if err != nil {
				t.Fatalf("run: %v\n%s", err, tail(transcript))
			}
			if res.Failed() {
				t.Fatalf("failed: %+v\n%s", res, tail(transcript))
			}
			b, err := os.ReadFile(filepath.Join(dir, "hello.txt"))
			if err != nil || strings.TrimSpace(string(b)) != "hello" {
				t.Errorf("hello.txt: %q, %v\n%s", b, err, tail(transcript))
			}
			if !strings.Contains(res.FinalText, "<promise>COMPLETE</promise>") {
				t.Errorf("FinalText = %q", res.FinalText)
			}
			if res.Usage.InputTokens+res.Usage.CacheReadTokens <= 0 || res.Usage.OutputTokens <= 0 {
				t.Errorf("Usage = %+v", res.Usage)
			}
			if res.SessionID == "" {
				t.Errorf("no session id")
			}
		})
	}
}

func TestRealCLIRateLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("real agent CLIs: skipped with -short")
	}
	for _, c := range realCLIs {
		t.Run(c.name, func(t *testing.T) {
			requireCLI(t, c.bin)
			dir := gitRepo(t)
			script := &llmtest.Script{Steps: []llmtest.Step{
				{Status: 429, Times: 1000, RetryAfter: 1, ErrorMessage: "Rate limit reached. Please try again in 20s."},
				{Text: "done"},
			}}
			res, transcript, err := runReal(t, c, dir, script)
			if err != nil {
				t.Fatalf("run: %v\n%s", err, tail(transcript))
			}
			if res.RateLimit == nil {
				t.Fatalf("no RateLimit: %+v\n%s", res, tail(transcript))
			}
			if !res.Failed() {
				t.Errorf("a rate-limited run should not look successful: %+v", res)
			}
		})
	}
}

func TestRealCLIMissingBinary(t *testing.T) {
	t.Setenv("RALPH_AGENTS_DIR", t.TempDir())
	t.Setenv("PATH", t.TempDir())
	for _, c := range append(realCLIs, realCLI{name: "amp"}) {
		a, err := New(c.name, Options{BaseURL: "http://127.0.0.1:9"})
		if err != nil {
			t.Fatal(err)
		}
		_, err = a.Run(t.Context(), Request{Dir: t.TempDir(), Prompt: "hi"})
		if err == nil || !strings.Contains(err.Error(), "npm install -g") {
			t.Errorf("%s: want an install hint, got %v", c.name, err)
		}
	}
}

func tail(s string) string {
	if len(s) > 3000 {
		return "…" + s[len(s)-3000:]
	}
	return s
}
