package llm

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ralph-loop/ralph/internal/llmtest"
)

func TestLLMRetryAfter(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	cases := []struct {
		h    map[string]string
		want time.Duration
	}{
		{nil, 0},
		{map[string]string{"Retry-After": "7"}, 7 * time.Second},
		{map[string]string{"Retry-After": "1.5"}, 1500 * time.Millisecond},
		{map[string]string{"Retry-After": "0"}, 0},
		{map[string]string{"Retry-After": "soon"}, 0},
		{map[string]string{"Retry-After": now.Add(30 * time.Second).Format(http.TimeFormat)}, 30 * time.Second},
		{map[string]string{"Retry-After-Ms": "250", "Retry-After": "9"}, 250 * time.Millisecond},
	}
	for _, c := range cases {
		h := http.Header{}
		for k, v := range c.h {
			h.Set(k, v)
		}
		if got := retryAfter(h, now); got != c.want {
			t.Errorf("RetryAfter(%v) = %s, want %s", c.h, got, c.want)
		}
	}
}

func TestLLMIsLoopback(t *testing.T) {
	for u, want := range map[string]bool{
		"http://127.0.0.1:11434/v1":     true,
		"http://localhost:8000/v1":      true,
		"http://[::1]:8000":             true,
		"https://api.openai.com/v1":     false,
		"https://api.anthropic.com":     false,
		"":                              false,
		"http://10.0.0.5:11434/v1":      false,
		"http://127.0.0.1.evil.com/v1/": false,
	} {
		if got := IsLoopback(u); got != want {
			t.Errorf("IsLoopback(%q) = %v, want %v", u, got, want)
		}
	}
}

func TestLLMNewUnknownProvider(t *testing.T) {
	if _, err := New(Config{Provider: "gemini"}); err == nil {
		t.Fatal("want error for unknown provider")
	}
	for _, p := range []string{"anthropic", "openai", "ollama"} {
		if _, err := New(Config{Provider: p}); err != nil {
			t.Errorf("New(%s): %v", p, err)
		}
	}
}

// errorServer answers every request with status and body, counting hits.
func errorServer(t *testing.T, status int, header map[string]string, body string) (*httptest.Server, *atomic.Int32) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		for k, v := range header {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

func providers(base string) map[string]Provider {
	return map[string]Provider{
		"anthropic": newAnthropic(Config{BaseURL: base, APIKey: "k"}),
		"openai":    newOpenAI(Config{BaseURL: base + "/v1", APIKey: "k"}),
	}
}

func simpleReq() Request {
	return Request{Model: "m", Messages: []Message{{Role: RoleUser, Text: "hi"}}}
}

func TestLLMRateLimitErrorNoRetry(t *testing.T) {
	srv, hits := errorServer(t, 429, map[string]string{"Retry-After": "12"},
		`{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`)
	for name, p := range providers(srv.URL) {
		hits.Store(0)
		_, err := p.Complete(context.Background(), simpleReq())
		var rl *RateLimitError
		if !errors.As(err, &rl) {
			t.Fatalf("%s: want *RateLimitError, got %T %v", name, err, err)
		}
		if rl.RetryAfter != 12*time.Second || rl.Message != "slow down" {
			t.Errorf("%s: got %+v", name, rl)
		}
		if n := hits.Load(); n != 1 {
			t.Errorf("%s: %d requests, want 1 (SDK retries must be off)", name, n)
		}
	}
}

func TestLLMServerErrorNoRetry(t *testing.T) {
	srv, hits := errorServer(t, 503, nil, `{"error":{"type":"overloaded_error","message":"busy right now"}}`)
	for name, p := range providers(srv.URL) {
		hits.Store(0)
		_, err := p.Complete(context.Background(), simpleReq())
		var ae *APIError
		if !errors.As(err, &ae) {
			t.Fatalf("%s: want *APIError, got %T %v", name, err, err)
		}
		if ae.Status != 503 || ae.Message != "busy right now" || !ae.Retryable() {
			t.Errorf("%s: got %+v", name, ae)
		}
		if !strings.Contains(ae.Error(), "503") || !strings.Contains(ae.Error(), "busy right now") {
			t.Errorf("%s: Error() = %q", name, ae.Error())
		}
		if n := hits.Load(); n != 1 {
			t.Errorf("%s: %d requests, want 1", name, n)
		}
	}
}

func TestLLMNonJSONErrorBody(t *testing.T) {
	srv, _ := errorServer(t, 502, nil, `<html>bad gateway</html>`)
	for name, p := range providers(srv.URL) {
		_, err := p.Complete(context.Background(), simpleReq())
		var ae *APIError
		if !errors.As(err, &ae) || ae.Status != 502 {
			t.Fatalf("%s: got %T %v", name, err, err)
		}
	}
}

// TestLLMRequestShapes checks the wire format each provider sends for a
// conversation with tool calls and results, and parses a tool-call reply.
func TestLLMRequestShapes(t *testing.T) {
	var got map[string]any
	var path, auth string
	reply := ""
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path = r.URL.Path
		auth = r.Header.Get("Authorization") + r.Header.Get("X-Api-Key")
		b, _ := io.ReadAll(r.Body)
		got = nil
		_ = json.Unmarshal(b, &got)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, reply)
	}))
	defer srv.Close()
	req := Request{
		Model:  "m1",
		System: "sys",
		Tools: []Tool{{Name: "read_file", Description: "read", Schema: map[string]any{
			"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}}, "required": []string{"path"},
		}}},
		Messages: []Message{
			{Role: RoleUser, Text: "do it"},
			{Role: RoleAssistant, Text: "ok", ToolCalls: []ToolCall{{ID: "c1", Name: "read_file", Input: json.RawMessage(`{"path":"a"}`)}}},
			{Role: RoleUser, ToolResults: []ToolResult{{CallID: "c1", Name: "read_file", Content: "nope", IsError: true}}},
		},
	}

	reply = `{"id":"msg_1","type":"message","role":"assistant","model":"m1","content":[{"type":"text","text":"hello"},{"type":"tool_use","id":"t9","name":"bash","input":{"command":"ls"}}],"stop_reason":"tool_use","usage":{"input_tokens":11,"output_tokens":5}}`
	resp, err := newAnthropic(Config{BaseURL: srv.URL + "/v1/", APIKey: "sk-ant"}).Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if path != "/v1/messages" || !strings.Contains(auth, "sk-ant") {
		t.Errorf("anthropic path %q auth %q", path, auth)
	}
	msgs := got["messages"].([]any)
	if len(msgs) != 3 || got["system"] == nil || len(got["tools"].([]any)) != 1 {
		t.Errorf("anthropic request: %v", got)
	}
	last, _ := json.Marshal(msgs[2])
	if !strings.Contains(string(last), `"tool_result"`) || !strings.Contains(string(last), `"is_error":true`) {
		t.Errorf("anthropic tool result: %s", last)
	}
	if resp.Text != "hello" || len(resp.ToolCalls) != 1 || resp.ToolCalls[0].Name != "bash" || string(resp.ToolCalls[0].Input) != `{"command":"ls"}` ||
		resp.StopReason != StopToolUse || resp.Usage.InputTokens != 11 || resp.Usage.OutputTokens != 5 {
		t.Errorf("anthropic response: %+v", resp)
	}

	reply = `{"id":"c","object":"chat.completion","model":"m1","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":"","tool_calls":[{"id":"x1","type":"function","function":{"name":"grep","arguments":"{\"pattern\":\"a\"}"}}]}}],"usage":{"prompt_tokens":20,"completion_tokens":3,"total_tokens":23}}`
	resp, err = newOpenAI(Config{BaseURL: srv.URL + "/v1", APIKey: "sk-oa"}).Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if path != "/v1/chat/completions" || auth != "Bearer sk-oa" {
		t.Errorf("openai path %q auth %q", path, auth)
	}
	msgs = got["messages"].([]any)
	if len(msgs) != 4 { // system, user, assistant, tool
		t.Fatalf("openai messages: %v", msgs)
	}
	if msgs[0].(map[string]any)["role"] != "system" || msgs[3].(map[string]any)["role"] != "tool" || msgs[3].(map[string]any)["tool_call_id"] != "c1" {
		t.Errorf("openai messages: %v", msgs)
	}
	if tc := msgs[2].(map[string]any)["tool_calls"].([]any); len(tc) != 1 {
		t.Errorf("openai assistant tool calls: %v", tc)
	}
	if resp.Text != "" || len(resp.ToolCalls) != 1 || resp.ToolCalls[0].ID != "x1" || string(resp.ToolCalls[0].Input) != `{"pattern":"a"}` ||
		resp.StopReason != StopToolUse || resp.Usage.InputTokens != 20 || resp.Usage.OutputTokens != 3 {
		t.Errorf("openai response: %+v", resp)
	}

	// Local servers need no key: a placeholder is sent.
	reply = `{"id":"c","object":"chat.completion","model":"m1","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"hi"}}]}`
	resp, err = newOpenAI(Config{BaseURL: srv.URL + "/v1"}).Complete(context.Background(), simpleReq())
	if err != nil || resp.Text != "hi" || resp.StopReason != StopEnd {
		t.Errorf("keyless openai: %+v %v", resp, err)
	}
}

// TestLLMAgainstScriptedServer runs both providers through a tool round
// trip against the scripted model server the agent tests use: the reply's
// tool call comes back parsed, and the results sent with the next request
// make the server count one assistant turn.
func TestLLMAgainstScriptedServer(t *testing.T) {
	script := &llmtest.Script{Steps: []llmtest.Step{
		{Text: "reading", ToolCalls: []llmtest.ToolCall{{Name: "read_file", Input: json.RawMessage(`{"path":"a.txt"}`)}}},
		{Text: "done <promise>COMPLETE</promise>"},
	}}
	for _, tc := range []struct{ provider, suffix, api string }{
		{Anthropic, "", llmtest.APIAnthropic},
		{OpenAI, "/v1", llmtest.APIChat},
	} {
		t.Run(tc.provider, func(t *testing.T) {
			srv, err := llmtest.Start(script, "")
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			p, err := New(Config{Provider: tc.provider, BaseURL: srv.URL() + tc.suffix})
			if err != nil {
				t.Fatal(err)
			}
			req := Request{Model: "scripted", System: "sys", Tools: []Tool{{Name: "read_file", Description: "read",
				Schema: map[string]any{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}}}}},
				Messages: []Message{{Role: RoleUser, Text: "go"}}}
			resp, err := p.Complete(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Text != "reading" || resp.StopReason != StopToolUse || len(resp.ToolCalls) != 1 ||
				resp.ToolCalls[0].Name != "read_file" || resp.ToolCalls[0].ID == "" || string(resp.ToolCalls[0].Input) != `{"path":"a.txt"}` ||
				resp.Usage.InputTokens <= 0 || resp.Usage.OutputTokens <= 0 {
				t.Fatalf("first reply %+v", resp)
			}
			call := resp.ToolCalls[0]
			req.Messages = append(req.Messages,
				Message{Role: RoleAssistant, Text: resp.Text, ToolCalls: resp.ToolCalls},
				Message{Role: RoleUser, ToolResults: []ToolResult{{CallID: call.ID, Name: call.Name, Content: "hello"}}})
			resp, err = p.Complete(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Text != "done <promise>COMPLETE</promise>" || resp.StopReason != StopEnd || len(resp.ToolCalls) != 0 {
				t.Fatalf("second reply %+v", resp)
			}
			reqs := srv.Requests()
			if len(reqs) != 2 || reqs[1].API != tc.api || reqs[1].Step != 1 || reqs[1].AssistantTurns != 1 || reqs[1].Stream || reqs[1].Status != 200 {
				t.Errorf("server log %+v", reqs)
			}
		})
	}
}

// TestLLMTimeout: Config.Timeout bounds one request.
func TestLLMTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	for name, p := range map[string]Provider{
		"anthropic": newAnthropic(Config{BaseURL: srv.URL, Timeout: 50 * time.Millisecond}),
		"openai":    newOpenAI(Config{BaseURL: srv.URL + "/v1", Timeout: 50 * time.Millisecond}),
	} {
		start := time.Now()
		_, err := p.Complete(context.Background(), simpleReq())
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
			t.Errorf("%s: %v after %s, want the deadline", name, err, time.Since(start))
		}
	}
}
