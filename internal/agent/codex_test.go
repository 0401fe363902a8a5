package agent

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestCodexParserWrite(t *testing.T) {
	res := parseRecorded(t, &codexParser{}, "codex-write.jsonl", 0, "")
	if res.FinalText != "done <promise>COMPLETE</promise>" {
		t.Errorf("FinalText = %q", res.FinalText)
	}
	if res.SessionID != "01a200d2-8413-7d02-936f-ef0922fc57a1" {
		t.Errorf("SessionID = %q", res.SessionID)
	}
	if res.Usage.InputTokens != 19888 || res.Usage.OutputTokens != 21 {
		t.Errorf("Usage = %+v", res.Usage)
	}
	// The "model metadata not found" item is a warning, not a failure.
	if res.IsError || res.RateLimit != nil || res.Turns != 1 {
		t.Errorf("res = %+v", res)
	}
}

func TestCodexParser429(t *testing.T) {
	res := parseRecorded(t, &codexParser{}, "codex-429.jsonl", 1, "")
	if !res.IsError || res.RateLimit == nil || !strings.Contains(res.ErrorText, "429") {
		t.Fatalf("res = %+v", res)
	}
}

func TestCodexParser500(t *testing.T) {
	res := parseRecorded(t, &codexParser{}, "codex-500.jsonl", 1, "")
	if !res.IsError || res.RateLimit != nil || res.ErrorText == "" {
		t.Fatalf("res = %+v", res)
	}
}

func TestCodexParserUsageLimit(t *testing.T) {
	p := &codexParser{}
	p.Line([]byte(`{"type":"thread.started","thread_id":"t1"}`))
	p.Line([]byte(`{"type":"error","message":"You've hit your usage limit. Upgrade to Pro (https://openai.com/chatgpt/pricing) or try again in 2 hours 5 minutes."}`))
	p.Line([]byte(`{"type":"turn.failed","error":{"message":"You've hit your usage limit. Upgrade to Pro (https://openai.com/chatgpt/pricing) or try again in 2 hours 5 minutes."}}`))
	res := Result{ExitCode: 1}
	p.Finish(&res, "")
	if res.RateLimit == nil || res.RateLimit.ResetAt.IsZero() {
		t.Fatalf("RateLimit = %+v", res.RateLimit)
	}
}

func TestCodexPlan(t *testing.T) {
	dir := t.TempDir()
	c := &codex{cliBase: newCLIBase(codexCLI, Options{BaseURL: "http://127.0.0.1:9", Command: []string{"codex"}})}
	zero := 0
	c.MaxRetries = &zero
	inv, err := c.Plan(Request{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(inv.Argv, " "); got != "codex exec --json --dangerously-bypass-approvals-and-sandbox --skip-git-repo-check -m gpt-5-codex -" {
		t.Errorf("argv = %s", got)
	}
	cfgPath := filepath.Join(codexHome(dir), "config.toml")
	cfg, ok := inv.Files[cfgPath]
	if !ok {
		t.Fatalf("no %s in %v", cfgPath, inv.Files)
	}
	for _, w := range []string{`base_url = "http://127.0.0.1:9/v1"`, `wire_api = "responses"`, `env_key = "RALPH_CODEX_API_KEY"`, `model_provider = "ralph"`, "request_max_retries = 0"} {
		if !strings.Contains(cfg, w) {
			t.Errorf("config lacks %q:\n%s", w, cfg)
		}
	}
	if !strings.Contains(strings.Join(inv.Env, " "), "CODEX_HOME="+codexHome(dir)) {
		t.Errorf("env = %v", inv.Env)
	}
	// Without a base URL: the user's own setup, nothing written.
	c = &codex{cliBase: newCLIBase(codexCLI, Options{})}
	c.BaseURL = ""
	inv, _ = c.Plan(Request{Dir: dir})
	if len(inv.Env) != 0 || len(inv.Files) != 0 {
		t.Errorf("without base URL: env %v files %v", inv.Env, inv.Files)
	}
}

func TestMissingBinaryError(t *testing.T) {
	t.Setenv("RALPH_AGENTS_DIR", t.TempDir())
	t.Setenv("PATH", t.TempDir())
	for _, name := range []string{"claude", "codex", "opencode", "gemini", "amp", "copilot"} {
		a, err := New(name, Options{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = a.Run(t.Context(), Request{Dir: t.TempDir(), Prompt: "hi"})
		if err == nil {
			t.Fatalf("%s: no error for a missing binary", name)
		}
		msg := err.Error()
		if !strings.Contains(msg, "npm install -g") || !strings.Contains(msg, "npm") {
			t.Errorf("%s: error does not say how to install: %v", name, err)
		}
	}
}
