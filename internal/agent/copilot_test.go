package agent

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestCopilotPlan(t *testing.T) {
	dir := t.TempDir()
	c := &copilot{cliBase: newCLIBase(copilotCLI, Options{Command: []string{"copilot"}})}
	c.BaseURL = ""
	req := Request{Dir: dir, ItemID: "US-1/x", Iteration: 3, Attempt: 2}
	inv, err := c.Plan(req)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"copilot", "--output-format", "json", "--allow-all", "--no-ask-user", "--no-auto-update", "--usage-output-file", filepath.Join(dir, ".ralph", "agents", "copilot-usage", "US-1_x-3-2.json")}
	if !slices.Equal(inv.Argv, want) || !inv.PromptStdin {
		t.Errorf("argv = %q, want %q", inv.Argv, want)
	}
	// Without a base URL: the user's Copilot login, no provider.
	for _, kv := range inv.Env {
		if strings.HasPrefix(kv, "COPILOT_PROVIDER") || strings.HasPrefix(kv, "COPILOT_OFFLINE") {
			t.Errorf("without a base URL: %s", kv)
		}
	}

	// A base URL: the OpenAI-compatible API at /v1, offline, a model.
	c.BaseURL, c.APIKeyEnv = "http://127.0.0.1:8080", ""
	inv, _ = c.Plan(req)
	for _, kv := range []string{"COPILOT_PROVIDER_BASE_URL=http://127.0.0.1:8080/v1", "COPILOT_PROVIDER_TYPE=openai", "COPILOT_MODEL=gpt-4.1", "COPILOT_OFFLINE=true", "COPILOT_PROVIDER_API_KEY=" + noKey} {
		if !slices.Contains(inv.Env, kv) {
			t.Errorf("env lacks %s: %v", kv, inv.Env)
		}
	}
	if !slices.Contains(inv.Argv, "--model") {
		t.Errorf("argv = %q", inv.Argv)
	}
	// --provider anthropic: the Messages API at the URL as given.
	a, err := New("copilot", Options{BaseURL: "http://h:1", Provider: "anthropic", Model: "claude-sonnet-4"})
	if err != nil {
		t.Fatal(err)
	}
	inv, _ = a.(*copilot).Plan(req)
	for _, kv := range []string{"COPILOT_PROVIDER_BASE_URL=http://h:1", "COPILOT_PROVIDER_TYPE=anthropic", "COPILOT_MODEL=claude-sonnet-4"} {
		if !slices.Contains(inv.Env, kv) {
			t.Errorf("env lacks %s: %v", kv, inv.Env)
		}
	}
	if _, err := New("copilot", Options{Provider: "gemini"}); err == nil || !strings.Contains(err.Error(), "openai") {
		t.Errorf("an unknown provider: %v", err)
	}
}

func feedCopilot(out string, exit int) Result {
	p := &copilotParser{}
	for _, l := range strings.Split(out, "\n") {
		p.Line([]byte(l))
	}
	res := Result{ExitCode: exit}
	p.Finish(&res, "")
	return res
}

// The lines are what copilot 1.0.102 prints (trimmed to the fields read).
func TestCopilotParser(t *testing.T) {
	res := feedCopilot(`{"type":"session.mcp_servers_loaded","data":{"servers":[]}}
{"type":"assistant.message","data":{"content":"","toolRequests":[{"name":"create"}]}}
{"type":"tool.execution_complete","data":{"success":true}}
{"type":"assistant.message","data":{"content":"Done.\n\n<promise>COMPLETE</promise>","toolRequests":[]}}
{"type":"assistant.idle","data":{}}
not json
{"type":"result","sessionId":"6d3f","exitCode":0,"usage":{"premiumRequests":0}}`, 0)
	if res.FinalText != "Done.\n\n<promise>COMPLETE</promise>" || res.Turns != 2 || res.SessionID != "6d3f" || res.Failed() {
		t.Fatalf("res = %+v", res)
	}
	res = feedCopilot(`{"type":"session.error","data":{"errorType":"query","message":"Failed to get response from the AI model; retried 5 times Last error: 500 boom","statusCode":500}}
{"type":"result","sessionId":"e7a7","exitCode":1}`, 1)
	if !res.IsError || res.RateLimit != nil || !strings.Contains(res.ErrorText, "500 boom") {
		t.Fatalf("a 500: %+v", res)
	}
	res = feedCopilot(`{"type":"session.error","data":{"message":"Failed to get response from the AI model; retried 5 times Last error: 429 slow down","statusCode":429}}`, 1)
	if res.RateLimit == nil {
		t.Fatalf("a 429 is a rate limit: %+v", res)
	}
}

func TestCopilotUsageFile(t *testing.T) {
	f := filepath.Join(t.TempDir(), "u.json")
	if err := os.WriteFile(f, []byte(`{"totalPremiumRequestCost":0,"modelMetrics":{"gpt-4.1":{"requests":{"count":3},"usage":{"inputTokens":100,"outputTokens":7,"cacheReadTokens":5,"cacheWriteTokens":1}},"o3":{"usage":{"inputTokens":10,"outputTokens":3}}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	u, ok := readCopilotUsage(f)
	if !ok || u != (Usage{InputTokens: 110, OutputTokens: 10, CacheReadTokens: 5, CacheWriteTokens: 1}) {
		t.Errorf("usage = %+v, %v", u, ok)
	}
	if _, ok := readCopilotUsage(f + ".missing"); ok {
		t.Error("a missing file reads as usage")
	}
}

func TestCopilotActivity(t *testing.T) {
	r := &ActivityReader{Agent: "copilot", Dir: "/w"}
	steps := r.Line([]byte(`{"type":"tool.execution_start","data":{"toolName":"bash","arguments":{"command":"go test ./...","description":"run"}}}`))
	if len(steps) != 1 || steps[0].Text != "bash go test ./..." {
		t.Errorf("steps = %+v", steps)
	}
	steps = r.Line([]byte(`{"type":"tool.execution_start","data":{"toolName":"create","arguments":{"path":"/w/a.go","file_text":"x"}}}`))
	if len(steps) != 1 || steps[0].Text != "create a.go" {
		t.Errorf("steps = %+v", steps)
	}
	steps = r.Line([]byte(`{"type":"assistant.message","data":{"content":"hello"}}`))
	if len(steps) != 1 || steps[0].Kind != "text" || steps[0].Text != "hello" {
		t.Errorf("steps = %+v", steps)
	}
}
