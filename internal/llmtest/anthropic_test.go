package llmtest

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
)

func anthropicClient(srv *Server) anthropic.Client {
	return anthropic.NewClient(option.WithBaseURL(srv.URL()), option.WithAPIKey("test-key"), option.WithMaxRetries(3))
}

func anthropicParams(msgs []anthropic.MessageParam) anthropic.MessageNewParams {
	return anthropic.MessageNewParams{
		Model:     "claude-sonnet-4-5",
		MaxTokens: 1024,
		System:    []anthropic.TextBlockParam{{Text: "You are a test."}},
		Messages:  msgs,
		Tools: []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{
			Name:        "write_file",
			InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"path": map[string]any{"type": "string"}, "content": map[string]any{"type": "string"}}},
		}}},
	}
}

func TestAnthropicStreamingToolRoundTrip(t *testing.T) {
	script := twoSteps()
	script.Steps[0].ToolCalls = append(script.Steps[0].ToolCalls, ToolCall{Name: "write_file", Input: json.RawMessage(`{"path":"b.txt","content":""}`)})
	srv, _ := startServer(t, script)
	client := anthropicClient(srv)
	ctx := context.Background()

	msgs := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("write a.txt"))}
	stream := client.Messages.NewStreaming(ctx, anthropicParams(msgs))
	var msg anthropic.Message
	var names []string
	for stream.Next() {
		ev := stream.Current()
		names = append(names, ev.Type)
		if err := msg.Accumulate(ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if names[0] != "message_start" || names[len(names)-1] != "message_stop" || names[len(names)-2] != "message_delta" {
		t.Errorf("event order: %v", names)
	}
	if msg.StopReason != anthropic.StopReasonToolUse {
		t.Errorf("stop reason %q", msg.StopReason)
	}
	if msg.Usage.InputTokens <= 0 || msg.Usage.OutputTokens <= 1 {
		t.Errorf("usage %+v", msg.Usage)
	}
	if len(msg.Content) != 3 {
		t.Fatalf("want text + 2 tool_use blocks, got %d", len(msg.Content))
	}
	if tb, ok := msg.Content[0].AsAny().(anthropic.TextBlock); !ok || tb.Text != "I will write the file now." {
		t.Errorf("first block %+v", msg.Content[0])
	}
	var results []anthropic.ContentBlockParamUnion
	ids := map[string]bool{}
	for i, b := range msg.Content[1:] {
		tu, ok := b.AsAny().(anthropic.ToolUseBlock)
		if !ok {
			t.Fatalf("block %d is %T", i+1, b.AsAny())
		}
		if !strings.HasPrefix(tu.ID, "toolu_01") || ids[tu.ID] {
			t.Errorf("bad or duplicate id %q", tu.ID)
		}
		ids[tu.ID] = true
		var in struct{ Path, Content string }
		if err := json.Unmarshal(tu.Input, &in); err != nil {
			t.Fatalf("tool input %s: %v", tu.Input, err)
		}
		if i == 0 && (in.Path != "a.txt" || in.Content != "héllo wörld — a somewhat longer line of content\n") {
			t.Errorf("tool input %+v", in)
		}
		results = append(results, anthropic.NewToolResultBlock(tu.ID, "ok", false))
	}

	msgs = append(msgs, msg.ToParam(), anthropic.NewUserMessage(results...))
	stream = client.Messages.NewStreaming(ctx, anthropicParams(msgs))
	var msg2 anthropic.Message
	for stream.Next() {
		if err := msg2.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if msg2.StopReason != anthropic.StopReasonEndTurn || len(msg2.Content) != 1 || msg2.Content[0].Text != "All done: wrote a.txt." {
		t.Errorf("second reply %+v", msg2)
	}
	if r := lastReq(t, srv); r.Step != 1 || r.AssistantTurns != 1 || !r.Stream || r.API != APIAnthropic {
		t.Errorf("log %+v", r)
	}
}

func TestAnthropicNonStreaming(t *testing.T) {
	srv, _ := startServer(t, twoSteps())
	client := anthropicClient(srv)
	msg, err := client.Messages.New(context.Background(), anthropicParams([]anthropic.MessageParam{
		anthropic.NewUserMessage(anthropic.NewTextBlock("go")),
	}))
	if err != nil {
		t.Fatal(err)
	}
	if msg.StopReason != anthropic.StopReasonToolUse || len(msg.Content) != 2 {
		t.Fatalf("reply %+v", msg)
	}
	tu := msg.Content[1].AsToolUse()
	if tu.Name != "write_file" || !strings.HasPrefix(tu.ID, "toolu_01") || !json.Valid(tu.Input) {
		t.Errorf("tool use %+v", tu)
	}
	if msg.Usage.InputTokens <= 0 || msg.Usage.OutputTokens <= 0 {
		t.Errorf("usage %+v", msg.Usage)
	}
	// Past the end of the script: last step's text, no tools.
	msgs := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("go"))}
	for range 3 {
		msgs = append(msgs, anthropic.NewAssistantMessage(anthropic.NewTextBlock("x")), anthropic.NewUserMessage(anthropic.NewTextBlock("more")))
	}
	msg, err = client.Messages.New(context.Background(), anthropicParams(msgs))
	if err != nil {
		t.Fatal(err)
	}
	if msg.StopReason != anthropic.StopReasonEndTurn || len(msg.Content) != 1 || msg.Content[0].Text != "All done: wrote a.txt." {
		t.Errorf("past end reply %+v", msg)
	}
	if r := lastReq(t, srv); r.Step != 3 || r.AssistantTurns != 3 {
		t.Errorf("log %+v", r)
	}
}

// Odd but valid-shaped requests: system as string, a system role message,
// string content, thinking and image blocks, ?beta=true.
func TestAnthropicLenientRequest(t *testing.T) {
	srv, _ := startServer(t, twoSteps())
	body := `{"model":"m","max_tokens":10,"system":"be brief","tools":[{"name":"write_file","input_schema":{"type":"object"}}],
	"messages":[{"role":"system","content":"sys"},{"role":"user","content":"hi"},
	{"role":"assistant","content":[{"type":"thinking","thinking":"hmm","signature":"x"},{"type":"text","text":"a"}]},
	{"role":"assistant","content":[{"type":"tool_use","id":"toolu_01x","name":"write_file","input":{}}]},
	{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01x","content":[{"type":"text","text":"ok"}]},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}}]}]}`
	res := post(t, srv.URL()+"/v1/messages?beta=true", body)
	if res.status != 200 {
		t.Fatalf("status %d: %s", res.status, res.body)
	}
	m := decode(t, res.body)
	if m["stop_reason"] != "end_turn" {
		t.Errorf("reply %s", res.body)
	}
	if r := lastReq(t, srv); r.AssistantTurns != 1 || r.Step != 1 {
		t.Errorf("two consecutive assistant messages must count as one turn: %+v", r)
	}
}

func TestAnthropicCountTokens(t *testing.T) {
	srv, _ := startServer(t, twoSteps())
	client := anthropicClient(srv)
	res, err := client.Messages.CountTokens(context.Background(), anthropic.MessageCountTokensParams{
		Model:    "claude-sonnet-4-5",
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hello there"))},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.InputTokens <= 0 {
		t.Errorf("input tokens %d", res.InputTokens)
	}
	if len(srv.Requests()) != 1 || srv.Requests()[0].Step != -1 {
		t.Errorf("count_tokens must not be a step: %+v", srv.Requests())
	}
}

func TestAnthropicRateLimitThenSuccess(t *testing.T) {
	script := twoSteps()
	script.Steps[0].Status = 429
	script.Steps[0].Times = 2
	srv, logPath := startServer(t, script)
	client := anthropicClient(srv) // retries on 429, Retry-After: 0
	msg, err := client.Messages.New(context.Background(), anthropicParams([]anthropic.MessageParam{
		anthropic.NewUserMessage(anthropic.NewTextBlock("go")),
	}))
	if err != nil {
		t.Fatal(err)
	}
	if msg.StopReason != anthropic.StopReasonToolUse {
		t.Errorf("reply %+v", msg)
	}
	log := readLog(t, logPath)
	var statuses []int
	for _, r := range log {
		statuses = append(statuses, r.Status)
	}
	if len(statuses) != 3 || statuses[0] != 429 || statuses[1] != 429 || statuses[2] != 200 || !log[0].Fault || log[2].Fault {
		t.Errorf("statuses %v", statuses)
	}

	// The raw error shape and headers.
	script = twoSteps()
	script.Steps[0].Status = 429
	script.Steps[0].RetryAfter = 7
	script.Steps[0].ErrorMessage = "slow down"
	srv2, _ := startServer(t, script)
	body := `{"model":"m","max_tokens":5,"tools":[{"name":"t"}],"messages":[{"role":"user","content":"x"}],"stream":true}`
	res := post(t, srv2.URL()+"/v1/messages", body)
	if res.status != 429 || res.header.Get("Retry-After") != "7" {
		t.Fatalf("status %d retry-after %q", res.status, res.header.Get("Retry-After"))
	}
	m := decode(t, res.body)
	e, _ := m["error"].(map[string]any)
	if m["type"] != "error" || e["type"] != "rate_limit_error" || e["message"] != "slow down" {
		t.Errorf("error body %s", res.body)
	}
	if res := post(t, srv2.URL()+"/v1/messages", body); res.status != 200 {
		t.Errorf("second request status %d", res.status)
	}
}

func TestAnthropicServerError(t *testing.T) {
	script := twoSteps()
	script.Steps[1].Status = 500
	srv, _ := startServer(t, script)
	body := `{"model":"m","max_tokens":5,"tools":[{"name":"t"}],"messages":[{"role":"user","content":"x"},{"role":"assistant","content":"y"},{"role":"user","content":"z"}]}`
	res := post(t, srv.URL()+"/v1/messages", body)
	m := decode(t, res.body)
	if res.status != 500 || m["error"].(map[string]any)["type"] != "api_error" {
		t.Errorf("status %d body %s", res.status, res.body)
	}
	// Step 0 has no fault; step 1 fault is used up.
	for _, b := range []string{`{"model":"m","max_tokens":5,"tools":[{"name":"t"}],"messages":[{"role":"user","content":"x"}]}`, body} {
		if res := post(t, srv.URL()+"/v1/messages", b); res.status != 200 {
			t.Errorf("status %d", res.status)
		}
	}
}
