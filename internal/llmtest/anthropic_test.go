package llmtest

import (
	"encoding/json"
	"strings"
	"testing"
)

// anthropicBody is a Messages request with one write_file tool over the
// given messages (JSON values).
func anthropicBody(stream bool, msgs ...any) string {
	b, _ := json.Marshal(map[string]any{
		"model":      "claude-sonnet-4-5",
		"max_tokens": 1024,
		"stream":     stream,
		"system":     []any{map[string]any{"type": "text", "text": "You are a test."}},
		"messages":   msgs,
		"tools": []any{map[string]any{"name": "write_file", "input_schema": map[string]any{"type": "object",
			"properties": map[string]any{"path": map[string]any{"type": "string"}, "content": map[string]any{"type": "string"}}}}},
	})
	return string(b)
}

func userText(text string) any {
	return map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": text}}}
}

// anthropicMessage is a Messages reply, streamed or not.
type anthropicMessage struct {
	ID         string `json:"id"`
	StopReason string `json:"stop_reason"`
	Content    []struct {
		Type  string          `json:"type"`
		Text  string          `json:"text"`
		ID    string          `json:"id"`
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
	} `json:"content"`
	Usage struct {
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
	} `json:"usage"`
}

// accumulateAnthropic folds a Messages event stream into the message it
// describes, as a client does, and returns the event names in order.
func accumulateAnthropic(t *testing.T, evs []sseEvent) (anthropicMessage, []string) {
	t.Helper()
	var msg anthropicMessage
	var names []string
	partial := map[int]string{}
	for _, ev := range evs {
		names = append(names, ev.name)
		var e struct {
			Type         string           `json:"type"`
			Index        int              `json:"index"`
			Message      anthropicMessage `json:"message"`
			ContentBlock json.RawMessage  `json:"content_block"`
			Delta        struct {
				Type        string `json:"type"`
				Text        string `json:"text"`
				PartialJSON string `json:"partial_json"`
				StopReason  string `json:"stop_reason"`
			} `json:"delta"`
			Usage struct {
				OutputTokens int `json:"output_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal([]byte(ev.data), &e); err != nil {
			t.Fatalf("event %s: %v: %s", ev.name, err, ev.data)
		}
		if e.Type != ev.name {
			t.Errorf("event %s carries type %q", ev.name, e.Type)
		}
		switch e.Type {
		case "message_start":
			msg = e.Message
		case "content_block_start":
			if e.Index != len(msg.Content) {
				t.Fatalf("block %d started after %d blocks", e.Index, len(msg.Content))
			}
			var b anthropicMessage
			if err := json.Unmarshal([]byte(`{"content":[`+string(e.ContentBlock)+`]}`), &b); err != nil {
				t.Fatal(err)
			}
			msg.Content = append(msg.Content, b.Content...)
		case "content_block_delta":
			switch e.Delta.Type {
			case "text_delta":
				msg.Content[e.Index].Text += e.Delta.Text
			case "input_json_delta":
				partial[e.Index] += e.Delta.PartialJSON
			default:
				t.Errorf("delta type %q", e.Delta.Type)
			}
		case "content_block_stop":
			if p, ok := partial[e.Index]; ok {
				msg.Content[e.Index].Input = json.RawMessage(p)
			}
		case "message_delta":
			msg.StopReason = e.Delta.StopReason
			msg.Usage.OutputTokens = e.Usage.OutputTokens
		}
	}
	return msg, names
}

func TestAnthropicStreamingToolRoundTrip(t *testing.T) {
	script := twoSteps()
	script.Steps[0].ToolCalls = append(script.Steps[0].ToolCalls, ToolCall{Name: "write_file", Input: json.RawMessage(`{"path":"b.txt","content":""}`)})
	srv, _ := startServer(t, script)

	msgs := []any{userText("write a.txt")}
	res := post(t, srv.URL()+"/v1/messages", anthropicBody(true, msgs...))
	if res.status != 200 || !strings.HasPrefix(res.header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d content type %q", res.status, res.header.Get("Content-Type"))
	}
	msg, names := accumulateAnthropic(t, parseSSE(t, res.body))
	if names[0] != "message_start" || names[len(names)-1] != "message_stop" || names[len(names)-2] != "message_delta" {
		t.Errorf("event order: %v", names)
	}
	if msg.StopReason != "tool_use" {
		t.Errorf("stop reason %q", msg.StopReason)
	}
	if msg.Usage.InputTokens <= 0 || msg.Usage.OutputTokens <= 1 {
		t.Errorf("usage %+v", msg.Usage)
	}
	if len(msg.Content) != 3 {
		t.Fatalf("want text + 2 tool_use blocks, got %d", len(msg.Content))
	}
	if b := msg.Content[0]; b.Type != "text" || b.Text != "I will write the file now." {
		t.Errorf("first block %+v", b)
	}
	var assistant, results []any
	assistant = append(assistant, map[string]any{"type": "text", "text": msg.Content[0].Text})
	ids := map[string]bool{}
	for i, tu := range msg.Content[1:] {
		if tu.Type != "tool_use" {
			t.Fatalf("block %d is %s", i+1, tu.Type)
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
		assistant = append(assistant, map[string]any{"type": "tool_use", "id": tu.ID, "name": tu.Name, "input": tu.Input})
		results = append(results, map[string]any{"type": "tool_result", "tool_use_id": tu.ID, "content": "ok"})
	}

	msgs = append(msgs, map[string]any{"role": "assistant", "content": assistant}, map[string]any{"role": "user", "content": results})
	res = post(t, srv.URL()+"/v1/messages", anthropicBody(true, msgs...))
	msg2, _ := accumulateAnthropic(t, parseSSE(t, res.body))
	if msg2.StopReason != "end_turn" || len(msg2.Content) != 1 || msg2.Content[0].Text != "All done: wrote a.txt." {
		t.Errorf("second reply %+v", msg2)
	}
	if r := lastReq(t, srv); r.Step != 1 || r.AssistantTurns != 1 || !r.Stream || r.API != APIAnthropic {
		t.Errorf("log %+v", r)
	}
}

func anthropicReply(t *testing.T, res httpResult) anthropicMessage {
	t.Helper()
	if res.status != 200 {
		t.Fatalf("status %d: %s", res.status, res.body)
	}
	var msg anthropicMessage
	if err := json.Unmarshal(res.body, &msg); err != nil {
		t.Fatalf("reply: %v: %s", err, res.body)
	}
	return msg
}

func TestAnthropicNonStreaming(t *testing.T) {
	srv, _ := startServer(t, twoSteps())
	msg := anthropicReply(t, post(t, srv.URL()+"/v1/messages", anthropicBody(false, userText("go"))))
	if msg.StopReason != "tool_use" || len(msg.Content) != 2 || !strings.HasPrefix(msg.ID, "msg_01") {
		t.Fatalf("reply %+v", msg)
	}
	tu := msg.Content[1]
	if tu.Type != "tool_use" || tu.Name != "write_file" || !strings.HasPrefix(tu.ID, "toolu_01") || !json.Valid(tu.Input) {
		t.Errorf("tool use %+v", tu)
	}
	if msg.Usage.InputTokens <= 0 || msg.Usage.OutputTokens <= 0 {
		t.Errorf("usage %+v", msg.Usage)
	}
	// Past the end of the script: last step's text, no tools.
	msgs := []any{userText("go")}
	for range 3 {
		msgs = append(msgs, map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "text", "text": "x"}}}, userText("more"))
	}
	msg = anthropicReply(t, post(t, srv.URL()+"/v1/messages", anthropicBody(false, msgs...)))
	if msg.StopReason != "end_turn" || len(msg.Content) != 1 || msg.Content[0].Text != "All done: wrote a.txt." {
		t.Errorf("past end reply %+v", msg)
	}
	if r := lastReq(t, srv); r.Step != 3 || r.AssistantTurns != 3 {
		t.Errorf("log %+v", r)
	}
}

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
	res := post(t, srv.URL()+"/v1/messages/count_tokens", `{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":"hello there"}]}`)
	if n, _ := decode(t, res.body)["input_tokens"].(float64); res.status != 200 || n <= 0 {
		t.Errorf("status %d body %s", res.status, res.body)
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
	// A client retrying on 429 (Retry-After: 0) gets the step on its third try.
	for _, want := range []int{429, 429, 200} {
		res := post(t, srv.URL()+"/v1/messages", anthropicBody(false, userText("go")))
		if res.status != want || res.header.Get("Retry-After") != map[int]string{429: "0", 200: ""}[want] {
			t.Fatalf("status %d retry-after %q, want %d", res.status, res.header.Get("Retry-After"), want)
		}
		if want == 200 && anthropicReply(t, res).StopReason != "tool_use" {
			t.Errorf("reply %s", res.body)
		}
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
