package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ralph-loop/ralph/internal/llm"
	"github.com/ralph-loop/ralph/internal/llmtest"
	"github.com/ralph-loop/ralph/internal/proc"
)

func newTools(t *testing.T) (*nativeTools, string) {
	t.Helper()
	dir := t.TempDir()
	return &nativeTools{dir: dir, runner: proc.Exec{}, bashTimeout: 10 * time.Second, env: os.Environ()}, dir
}

func callTool(t *testing.T, tools *nativeTools, name string, args any) (string, bool) {
	t.Helper()
	b, _ := json.Marshal(args)
	return tools.call(context.Background(), name, b)
}

func TestNativeToolsConfinement(t *testing.T) {
	tools, dir := newTools(t)
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret.txt")
	os.WriteFile(secret, []byte("SECRET"), 0o644)
	if err := os.Symlink(outside, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	bad := []string{"../x", "../../etc/passwd", "a/../../x", secret, "/etc/passwd", "link/secret.txt", "link/new.txt", ""}
	for _, p := range bad {
		for _, tc := range []struct {
			name string
			args map[string]any
		}{
			{"read_file", map[string]any{"path": p}},
			{"write_file", map[string]any{"path": p, "content": "pwned"}},
			{"edit_file", map[string]any{"path": p, "old_string": "SECRET", "new_string": "pwned"}},
			{"list_files", map[string]any{"path": p}},
			{"grep", map[string]any{"pattern": "SECRET", "path": p}},
		} {
			if p == "" && (tc.name == "list_files" || tc.name == "grep") {
				continue // empty means the work tree there
			}
			out, isErr := callTool(t, tools, tc.name, tc.args)
			if !isErr {
				t.Errorf("%s %q: not refused: %s", tc.name, p, out)
			}
			if strings.Contains(out, "SECRET") && !strings.Contains(out, "escapes") {
				t.Errorf("%s %q leaked: %s", tc.name, p, out)
			}
		}
	}
	if b, _ := os.ReadFile(secret); string(b) != "SECRET" {
		t.Fatalf("outside file changed: %q", b)
	}
	if _, err := os.Stat(filepath.Join(outside, "new.txt")); err == nil {
		t.Fatal("file created outside the work tree through a symlink")
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "x")); err == nil {
		t.Fatal("../x was created")
	}
	// An absolute path inside the tree and a symlink inside the tree are fine.
	out, isErr := callTool(t, tools, "write_file", map[string]any{"path": filepath.Join(dir, "sub", "a.txt"), "content": "A"})
	if isErr {
		t.Fatalf("absolute path inside refused: %s", out)
	}
	os.Symlink("sub", filepath.Join(dir, "inner"))
	if out, isErr := callTool(t, tools, "read_file", map[string]any{"path": "inner/a.txt"}); isErr || out != "A" {
		t.Fatalf("inner symlink: %q %v", out, isErr)
	}
}

func TestNativeToolsReadWriteEdit(t *testing.T) {
	tools, dir := newTools(t)
	out, isErr := callTool(t, tools, "write_file", map[string]any{"path": "d/e/f.txt", "content": "one two two\n"})
	if isErr || !strings.Contains(out, "d/e/f.txt") {
		t.Fatalf("write: %q %v", out, isErr)
	}
	if out, _ := callTool(t, tools, "read_file", map[string]any{"path": "d/e/f.txt"}); out != "one two two\n" {
		t.Fatalf("read: %q", out)
	}
	cases := []struct {
		old, new string
		errPart  string
	}{
		{"two", "2", "occurs 2 times"},
		{"three", "3", "not found"},
		{"One", "1", "not found"}, // exact, case-sensitive
		{"", "x", "old_string is empty"},
		{"one", "one", "same"},
	}
	for _, c := range cases {
		out, isErr := callTool(t, tools, "edit_file", map[string]any{"path": "d/e/f.txt", "old_string": c.old, "new_string": c.new})
		if !isErr || !strings.Contains(out, c.errPart) {
			t.Errorf("edit %q→%q: %q %v, want error containing %q", c.old, c.new, out, isErr, c.errPart)
		}
	}
	if out, isErr := callTool(t, tools, "edit_file", map[string]any{"path": "d/e/f.txt", "old_string": "one two", "new_string": "1 2"}); isErr {
		t.Fatalf("edit: %s", out)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "d/e/f.txt")); string(b) != "1 2 two\n" {
		t.Fatalf("after edit: %q", b)
	}
	if out, isErr := callTool(t, tools, "edit_file", map[string]any{"path": "nope.txt", "old_string": "a", "new_string": "b"}); !isErr {
		t.Errorf("edit of missing file: %q", out)
	}
	if out, isErr := callTool(t, tools, "edit_file", map[string]any{"path": "d/e/f.txt", "old_string": "a"}); !isErr || !strings.Contains(out, "new_string") {
		t.Errorf("edit without new_string: %q", out)
	}
	if out, isErr := callTool(t, tools, "read_file", map[string]any{"path": "d"}); !isErr {
		t.Errorf("read of a dir: %q", out)
	}
	if out, isErr := tools.call(context.Background(), "read_file", json.RawMessage(`{"path":`)); !isErr || !strings.Contains(out, "invalid arguments") {
		t.Errorf("bad json: %q", out)
	}
	if out, isErr := callTool(t, tools, "rm_rf", map[string]any{}); !isErr || !strings.Contains(out, "unknown tool") {
		t.Errorf("unknown tool: %q", out)
	}
	big := strings.Repeat("x", nativeReadCap+100)
	os.WriteFile(filepath.Join(dir, "big.txt"), []byte(big), 0o644)
	if out, _ := callTool(t, tools, "read_file", map[string]any{"path": "big.txt"}); len(out) > nativeReadCap+200 || !strings.Contains(out, "truncated") {
		t.Errorf("read cap: %d bytes", len(out))
	}
}

func TestNativeToolsListAndGrep(t *testing.T) {
	tools, dir := newTools(t)
	os.MkdirAll(filepath.Join(dir, ".git", "objects"), 0o755)
	os.WriteFile(filepath.Join(dir, ".git", "config"), []byte("needle"), 0o644)
	os.MkdirAll(filepath.Join(dir, "src"), 0o755)
	os.WriteFile(filepath.Join(dir, "src", "a.go"), []byte("package a\n// needle here\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "bin"), []byte("needle\x00binary"), 0o644)
	out, isErr := callTool(t, tools, "list_files", map[string]any{})
	if isErr || !strings.Contains(out, "src/\n") || !strings.Contains(out, "src/a.go") || strings.Contains(out, ".git") {
		t.Errorf("list_files: %q", out)
	}
	out, _ = callTool(t, tools, "list_files", map[string]any{"path": "src"})
	if strings.TrimSpace(out) != "src/a.go" {
		t.Errorf("list_files src: %q", out)
	}
	out, isErr = callTool(t, tools, "grep", map[string]any{"pattern": "need+le"})
	if isErr || strings.TrimSpace(out) != "src/a.go:2: // needle here" {
		t.Errorf("grep: %q", out)
	}
	if out, isErr := callTool(t, tools, "grep", map[string]any{"pattern": "("}); !isErr || !strings.Contains(out, "bad pattern") {
		t.Errorf("bad pattern: %q", out)
	}
	if out, _ := callTool(t, tools, "grep", map[string]any{"pattern": "zzz"}); out != "(no matches)" {
		t.Errorf("no match: %q", out)
	}
	// Bounded output.
	var many strings.Builder
	for i := 0; i < 5000; i++ {
		many.WriteString("match line with some padding to make it longer than needed\n")
	}
	os.WriteFile(filepath.Join(dir, "many.txt"), []byte(many.String()), 0o644)
	out, _ = callTool(t, tools, "grep", map[string]any{"pattern": "match", "path": "many.txt"})
	if len(out) > nativeOutputCap+500 || !strings.Contains(out, "stopped after") {
		t.Errorf("grep not bounded: %d bytes", len(out))
	}
}

func TestNativeToolsBash(t *testing.T) {
	tools, dir := newTools(t)
	out, isErr := callTool(t, tools, "bash", map[string]any{"command": "pwd; echo err >&2; exit 3"})
	if !isErr || !strings.Contains(out, dir) || !strings.Contains(out, "err") || !strings.Contains(out, "[exit code 3]") {
		t.Errorf("bash: %q %v", out, isErr)
	}
	out, isErr = callTool(t, tools, "bash", map[string]any{"command": "echo hi > made.txt && cat made.txt"})
	if isErr || !strings.Contains(out, "hi\n[exit code 0]") {
		t.Errorf("bash ok: %q", out)
	}
	start := time.Now()
	out, isErr = callTool(t, tools, "bash", map[string]any{"command": "sleep 30 & sleep 30", "timeout_seconds": 1})
	if !isErr || !strings.Contains(out, "timed out") || time.Since(start) > 10*time.Second {
		t.Errorf("bash timeout: %q %v after %s", out, isErr, time.Since(start))
	}
	out, _ = callTool(t, tools, "bash", map[string]any{"command": "echo START; head -c 200000 /dev/zero | tr '\\0' a; echo; echo END"})
	if len(out) > nativeOutputCap+300 || !strings.Contains(out, "truncated") || !strings.HasPrefix(out, "START") || !strings.Contains(out, "END\n[exit code 0]") {
		t.Errorf("bash cap: %d bytes, head %q tail %q", len(out), trunc(out, 40), out[max(0, len(out)-60):])
	}
	if out, isErr := callTool(t, tools, "bash", map[string]any{"command": " "}); !isErr {
		t.Errorf("empty command: %q", out)
	}
}

func TestNativeBashEnvHidesKey(t *testing.T) {
	env := nativeEnv([]string{"RALPH_X=1", "MY_KEY=secret"}, "MY_KEY")
	for _, kv := range env {
		if strings.HasPrefix(kv, "MY_KEY=") {
			t.Fatal("API key variable passed to bash")
		}
	}
	if !contains(env, "RALPH_X=1") {
		t.Fatal("request env missing")
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func envMap(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestNativeConfig(t *testing.T) {
	n, err := newNative(Options{}, envMap(map[string]string{
		"RALPH_NATIVE_PROVIDER": "openai", "RALPH_NATIVE_BASE_URL": "http://127.0.0.1:11434/v1", "RALPH_NATIVE_MODEL": "qwen3",
	}))
	if err != nil {
		t.Fatal(err)
	}
	inv, err := n.Plan(Request{Dir: "/w"})
	if err != nil {
		t.Fatalf("ollama without key should be allowed: %v", err)
	}
	if !strings.Contains(inv.Note, "openai") || !strings.Contains(inv.Note, "11434") || !strings.Contains(inv.Note, "qwen3") || len(inv.Env) != 0 || len(inv.Argv) != 0 {
		t.Errorf("plan: %+v", inv)
	}

	// Options win over env; key comes from the named variable and is masked.
	n, err = newNative(Options{Provider: "anthropic", Model: "claude-x", APIKeyEnv: "MY_KEY", Args: []string{"max_turns=7"}},
		envMap(map[string]string{"RALPH_NATIVE_PROVIDER": "openai", "MY_KEY": "sk-ant-1234567890abcdef"}))
	if err != nil {
		t.Fatal(err)
	}
	inv, err = n.Plan(Request{Model: "claude-y"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(inv.Note, "1234567890abcdef") || !strings.Contains(inv.Note, "claude-y") || !strings.Contains(inv.Note, "api.anthropic.com") || !strings.Contains(inv.Note, "max 7 turns") {
		t.Errorf("note: %s", inv.Note)
	}

	// Missing key (remote) and missing model are clear errors.
	n, _ = newNative(Options{Model: "m"}, envMap(nil))
	if _, err := n.Plan(Request{}); err == nil || !strings.Contains(err.Error(), "ANTHROPIC_API_KEY") {
		t.Errorf("missing key: %v", err)
	}
	res, err := n.Run(context.Background(), Request{Dir: t.TempDir()})
	if err != nil || !res.IsError || res.ExitCode != 1 || !strings.Contains(res.ErrorText, "API key") {
		t.Errorf("run without key: %+v %v", res, err)
	}
	n, _ = newNative(Options{}, envMap(map[string]string{"OPENAI_API_KEY": "k"}))
	if n.Provider != "openai" || n.APIKeyEnv != "OPENAI_API_KEY" {
		t.Errorf("provider from key: %+v", n)
	}
	if _, err := n.Plan(Request{}); err == nil || !strings.Contains(err.Error(), "model") {
		t.Errorf("missing model: %v", err)
	}
	if _, err := newNative(Options{Provider: "gemini"}, envMap(nil)); err == nil {
		t.Error("unknown provider accepted")
	}
	if _, err := newNative(Options{Args: []string{"max_turns=x"}}, envMap(nil)); err == nil {
		t.Error("bad max_turns accepted")
	}
	if _, err := newNative(Options{Args: []string{"colour=red"}}, envMap(nil)); err == nil {
		t.Error("unknown arg accepted")
	}
	a, err := New("native", Options{Provider: "openai", Model: "m", BaseURL: "http://localhost:8000/v1"})
	if err != nil || a.Name() != "native" {
		t.Fatalf("registry: %v", err)
	}
}

// fakeLLM replays responses and records the requests it saw.
type fakeLLM struct {
	mu    sync.Mutex
	steps []func(req llm.Request) (llm.Response, error)
	reqs  []llm.Request
}

func (f *fakeLLM) Name() string { return "fake" }

func (f *fakeLLM) Complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	f.mu.Lock()
	i := len(f.reqs)
	cp := req
	cp.Messages = append([]llm.Message{}, req.Messages...)
	f.reqs = append(f.reqs, cp)
	f.mu.Unlock()
	if i >= len(f.steps) {
		i = len(f.steps) - 1
	}
	return f.steps[i](req)
}

func reply(text string, calls ...llm.ToolCall) func(llm.Request) (llm.Response, error) {
	return func(llm.Request) (llm.Response, error) {
		stop := llm.StopEnd
		if len(calls) > 0 {
			stop = llm.StopToolUse
		}
		return llm.Response{Text: text, ToolCalls: calls, StopReason: stop, Usage: llm.Usage{InputTokens: 10, OutputTokens: 2}}, nil
	}
}

func call(id, name, input string) llm.ToolCall {
	return llm.ToolCall{ID: id, Name: name, Input: json.RawMessage(input)}
}

func TestNativeLoopFake(t *testing.T) {
	dir := t.TempDir()
	f := &fakeLLM{steps: []func(llm.Request) (llm.Response, error){
		reply("writing", call("1", "write_file", `{"path":"a.txt","content":"hello world\n"}`), call("2", "read_file", `{"path":"../etc/passwd"}`)),
		reply("", call("3", "edit_file", `{"path":"a.txt","old_string":"world","new_string":"ralph"}`)),
		reply("all done <promise>COMPLETE</promise>"),
	}}
	var tr bytes.Buffer
	n := &Native{Provider: "anthropic", Client: f}
	res, err := n.Run(context.Background(), Request{Prompt: "make a.txt", Dir: dir, Transcript: &tr})
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed() || res.FinalText != "all done <promise>COMPLETE</promise>" || res.Turns != 3 || res.Usage.InputTokens != 30 || res.Usage.OutputTokens != 6 {
		t.Fatalf("result: %+v", res)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(b) != "hello ralph\n" {
		t.Fatalf("a.txt = %q", b)
	}
	// Conversation fed back: system prompt, prompt, tool results with ids and errors.
	r0 := f.reqs[0]
	if !strings.Contains(r0.System, dir) || r0.Messages[0].Text != "make a.txt" || len(r0.Tools) != 6 {
		t.Errorf("first request: %+v", r0)
	}
	r1 := f.reqs[1]
	if len(r1.Messages) != 3 || len(r1.Messages[2].ToolResults) != 2 {
		t.Fatalf("second request messages: %+v", r1.Messages)
	}
	tr0, tr1 := r1.Messages[2].ToolResults[0], r1.Messages[2].ToolResults[1]
	if tr0.CallID != "1" || tr0.IsError || tr1.CallID != "2" || !tr1.IsError || !strings.Contains(tr1.Content, "escapes") {
		t.Errorf("tool results: %+v %+v", tr0, tr1)
	}
	ts := tr.String()
	for _, want := range []string{"> tool write_file content=(12 bytes) path=a.txt", "> tool read_file path=../etc/passwd", "< error: path \"../etc/passwd\" escapes", "> tool edit_file", "all done"} {
		if !strings.Contains(ts, want) {
			t.Errorf("transcript lacks %q:\n%s", want, ts)
		}
	}
}

func TestNativeLoopMaxTurns(t *testing.T) {
	f := &fakeLLM{steps: []func(llm.Request) (llm.Response, error){reply("again", call("1", "list_files", `{}`))}}
	n := &Native{Client: f}
	res, err := n.Run(context.Background(), Request{Dir: t.TempDir(), Args: []string{"max_turns=3"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Turns != 3 || !res.IsError || res.ExitCode != 1 || !strings.Contains(res.ErrorText, "3 turns") {
		t.Fatalf("%+v", res)
	}
}

func TestNativeLoopErrors(t *testing.T) {
	errStep := func(err error) []func(llm.Request) (llm.Response, error) {
		return []func(llm.Request) (llm.Response, error){func(llm.Request) (llm.Response, error) { return llm.Response{}, err }}
	}
	// Rate limit: a Result with RateLimit, not an error.
	res, err := (&Native{Client: &fakeLLM{steps: errStep(&llm.RateLimitError{RetryAfter: time.Minute, Message: "slow"})}}).Run(context.Background(), Request{Dir: t.TempDir()})
	if err != nil || res.RateLimit == nil || res.RateLimit.Message != "slow" || time.Until(res.RateLimit.ResetAt) < 50*time.Second || res.IsError {
		t.Fatalf("rate limit: %+v %v", res, err)
	}
	// Unknown reset time stays zero.
	res, _ = (&Native{Client: &fakeLLM{steps: errStep(&llm.RateLimitError{})}}).Run(context.Background(), Request{Dir: t.TempDir()})
	if res.RateLimit == nil || !res.RateLimit.ResetAt.IsZero() || res.RateLimit.Message == "" {
		t.Fatalf("rate limit without reset: %+v", res.RateLimit)
	}
	// API error: IsError, exit 1.
	res, err = (&Native{Client: &fakeLLM{steps: errStep(&llm.APIError{Provider: "anthropic", Status: 500, Message: "boom"})}}).Run(context.Background(), Request{Dir: t.TempDir()})
	if err != nil || !res.IsError || res.ExitCode != 1 || !strings.Contains(res.ErrorText, "boom") || !strings.Contains(res.ErrorText, "500") {
		t.Fatalf("api error: %+v %v", res, err)
	}
	// Timeout: the context ends while the model "thinks".
	blocker := &blockingLLM{}
	res, err = (&Native{Client: blocker}).Run(context.Background(), Request{Dir: t.TempDir(), Timeout: 200 * time.Millisecond})
	if err != nil || !res.TimedOut || res.ExitCode != -1 {
		t.Fatalf("timeout: %+v %v", res, err)
	}
	// Caller cancel: returned as the context error.
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(100 * time.Millisecond); cancel() }()
	_, err = (&Native{Client: blocker}).Run(ctx, Request{Dir: t.TempDir(), Timeout: time.Minute})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancel: %v", err)
	}
}

type blockingLLM struct{}

func (blockingLLM) Name() string { return "block" }
func (blockingLLM) Complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	<-ctx.Done()
	return llm.Response{}, ctx.Err()
}

// ---- end to end against the scripted LLM server ----

func e2eScript() *llmtest.Script {
	return &llmtest.Script{Steps: []llmtest.Step{
		{Text: "I will write the file.", ToolCalls: []llmtest.ToolCall{{Name: "write_file", Input: json.RawMessage(`{"path":"hello.txt","content":"hello world\n"}`)}}},
		{ToolCalls: []llmtest.ToolCall{{Name: "edit_file", Input: json.RawMessage(`{"path":"hello.txt","old_string":"world","new_string":"ralph"}`)}}},
		{Text: "done <promise>COMPLETE</promise>"},
	}}
}

func e2eAgent(t *testing.T, provider, url string) *Native {
	t.Helper()
	base := url
	if provider == "openai" {
		base += "/v1"
	}
	n, err := newNative(Options{Provider: provider, BaseURL: base, Model: "test-model", APIKeyEnv: "RALPH_TEST_NO_SUCH_KEY"}, envMap(nil))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestNativeE2E(t *testing.T) {
	for _, provider := range []string{"anthropic", "openai"} {
		t.Run(provider, func(t *testing.T) {
			srv, err := llmtest.Start(e2eScript(), filepath.Join(t.TempDir(), "llm.log"))
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			dir := t.TempDir()
			var tr bytes.Buffer
			n := e2eAgent(t, provider, srv.URL())
			if _, err := n.Plan(Request{Dir: dir}); err != nil {
				t.Fatalf("plan: %v", err)
			}
			res, err := n.Run(context.Background(), Request{Prompt: "write hello.txt", Dir: dir, Transcript: &tr, Timeout: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			if res.Failed() {
				t.Fatalf("failed: %+v\n%s", res, tr.String())
			}
			if b, _ := os.ReadFile(filepath.Join(dir, "hello.txt")); string(b) != "hello ralph\n" {
				t.Fatalf("hello.txt = %q\n%s", b, tr.String())
			}
			if res.FinalText != "done <promise>COMPLETE</promise>" || res.Turns != 3 {
				t.Errorf("final %q turns %d", res.FinalText, res.Turns)
			}
			if res.Usage.InputTokens <= 0 || res.Usage.OutputTokens <= 0 {
				t.Errorf("usage: %+v", res.Usage)
			}
			reqs := srv.Requests()
			if len(reqs) != 3 {
				t.Errorf("%d requests, want 3", len(reqs))
			}
			for _, r := range reqs {
				if r.Model != "test-model" || r.Tools != 6 || r.Fault {
					t.Errorf("request: %+v", r)
				}
			}
			if !strings.Contains(tr.String(), "> tool write_file") || !strings.Contains(tr.String(), "> tool edit_file") {
				t.Errorf("transcript:\n%s", tr.String())
			}
		})
	}
}

func TestNativeE2ERateLimit(t *testing.T) {
	for _, provider := range []string{"anthropic", "openai"} {
		t.Run(provider, func(t *testing.T) {
			script := e2eScript()
			script.Steps[1].Status = 429
			script.Steps[1].RetryAfter = 30
			srv, err := llmtest.Start(script, "")
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			dir := t.TempDir()
			res, err := e2eAgent(t, provider, srv.URL()).Run(context.Background(), Request{Prompt: "go", Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			if res.RateLimit == nil {
				t.Fatalf("no rate limit: %+v", res)
			}
			if d := time.Until(res.RateLimit.ResetAt); d < 20*time.Second || d > 31*time.Second {
				t.Errorf("reset in %s, want ~30s", d)
			}
			if res.IsError || res.Turns != 1 {
				t.Errorf("result: %+v", res)
			}
			if n := len(srv.Requests()); n != 2 {
				t.Errorf("%d requests, want 2 (no SDK retry)", n)
			}
			// The engine retries later: the same server now serves the step.
			res, err = e2eAgent(t, provider, srv.URL()).Run(context.Background(), Request{Prompt: "go", Dir: t.TempDir()})
			if err != nil || res.Failed() || res.FinalText != "done <promise>COMPLETE</promise>" {
				t.Errorf("retry: %+v %v", res, err)
			}
		})
	}
}

func TestNativeE2EServerError(t *testing.T) {
	script := e2eScript()
	script.Steps[0].Status = 500
	srv, err := llmtest.Start(script, "")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	res, err := e2eAgent(t, "openai", srv.URL()).Run(context.Background(), Request{Prompt: "go", Dir: t.TempDir()})
	if err != nil || !res.IsError || res.ExitCode != 1 || !strings.Contains(res.ErrorText, "500") || res.RateLimit != nil {
		t.Fatalf("%+v %v", res, err)
	}
}
