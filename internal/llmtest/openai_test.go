package llmtest

import (
	"encoding/json"
	"strings"
	"testing"
)

var writeFileSchema = map[string]any{
	"type":       "object",
	"properties": map[string]any{"path": map[string]any{"type": "string"}, "content": map[string]any{"type": "string"}},
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// responsesBody is a Responses request with one write_file function tool.
func responsesBody(stream bool, input []any) string {
	return mustJSON(map[string]any{
		"model":        "gpt-5",
		"stream":       stream,
		"instructions": "You are a test.",
		"input":        input,
		"tools":        []any{map[string]any{"type": "function", "name": "write_file", "parameters": writeFileSchema, "strict": false}},
	})
}

func inputMessage(role, text string) any {
	return map[string]any{"type": "message", "role": role, "content": text}
}

// responsesItemOut is an output item of a Responses reply.
type responsesItemOut struct {
	Type      string `json:"type"`
	ID        string `json:"id"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Content   []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
}

// responsesReply is a Responses reply (or the response of an event).
type responsesReply struct {
	Status string             `json:"status"`
	Output []responsesItemOut `json:"output"`
	Usage  *struct {
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
		TotalTokens  int `json:"total_tokens"`
	} `json:"usage"`
}

// outputText joins the output_text parts of the reply's messages.
func (r responsesReply) outputText() string {
	var b strings.Builder
	for _, it := range r.Output {
		for _, c := range it.Content {
			if it.Type == "message" && c.Type == "output_text" {
				b.WriteString(c.Text)
			}
		}
	}
	return b.String()
}

// responsesEvent is one event of a Responses stream.
type responsesEvent struct {
	Type     string           `json:"type"`
	Sequence int64            `json:"sequence_number"`
	Delta    string           `json:"delta"`
	Item     responsesItemOut `json:"item"`
	Response responsesReply   `json:"response"`
}

func responsesEvents(t *testing.T, res httpResult) []responsesEvent {
	t.Helper()
	if res.status != 200 {
		t.Fatalf("status %d: %s", res.status, res.body)
	}
	var out []responsesEvent
	for _, sev := range parseSSE(t, res.body) {
		var ev responsesEvent
		if err := json.Unmarshal([]byte(sev.data), &ev); err != nil {
			t.Fatalf("event %s: %v", sev.name, err)
		}
		if ev.Type != sev.name {
			t.Errorf("event %s carries type %q", sev.name, ev.Type)
		}
		out = append(out, ev)
	}
	return out
}

func TestResponsesStreamingRoundTrip(t *testing.T) {
	script := twoSteps()
	script.Steps[0].ToolCalls = append(script.Steps[0].ToolCalls, ToolCall{Name: "write_file", Input: json.RawMessage(`{"path":"b.txt","content":"b"}`)})
	srv, _ := startServer(t, script)

	input := []any{inputMessage("user", "write a.txt")}
	var done []responsesItemOut
	var completed *responsesReply
	var text strings.Builder
	var types []string
	for seq, ev := range responsesEvents(t, post(t, srv.URL()+"/v1/responses", responsesBody(true, input))) {
		types = append(types, ev.Type)
		if ev.Sequence != int64(seq) {
			t.Errorf("event %s has sequence_number %d, want %d", ev.Type, ev.Sequence, seq)
		}
		switch ev.Type {
		case "response.output_text.delta":
			text.WriteString(ev.Delta)
		case "response.output_item.done":
			done = append(done, ev.Item)
		case "response.completed":
			r := ev.Response
			completed = &r
		}
	}
	if types[0] != "response.created" || types[1] != "response.in_progress" || types[len(types)-1] != "response.completed" {
		t.Errorf("event order %v", types)
	}
	for _, want := range []string{"response.output_item.added", "response.content_part.added", "response.output_text.done",
		"response.content_part.done", "response.function_call_arguments.delta", "response.function_call_arguments.done"} {
		if !strings.Contains(strings.Join(types, " "), want) {
			t.Errorf("missing event %s", want)
		}
	}
	if text.String() != "I will write the file now." {
		t.Errorf("text %q", text.String())
	}
	if completed == nil || completed.Status != "completed" || completed.Usage == nil || completed.Usage.InputTokens <= 0 || completed.Usage.OutputTokens <= 0 ||
		completed.Usage.TotalTokens != completed.Usage.InputTokens+completed.Usage.OutputTokens {
		t.Fatalf("completed %+v", completed)
	}
	if completed.outputText() != "I will write the file now." || len(completed.Output) != 3 {
		t.Errorf("completed output %+v", completed.Output)
	}
	if len(done) != 3 || done[0].Type != "message" || done[1].Type != "function_call" || done[2].Type != "function_call" {
		t.Fatalf("items %+v", done)
	}
	// Codex-style history: message, then call/output pairs interleaved.
	input = append(input, inputMessage("assistant", done[0].Content[0].Text))
	for _, fc := range done[1:] {
		var args map[string]string
		if err := json.Unmarshal([]byte(fc.Arguments), &args); err != nil || args["path"] == "" {
			t.Fatalf("arguments %q: %v", fc.Arguments, err)
		}
		if fc.Name != "write_file" || !strings.HasPrefix(fc.CallID, "call_") {
			t.Errorf("function call %+v", fc)
		}
		input = append(input,
			map[string]any{"type": "function_call", "call_id": fc.CallID, "name": fc.Name, "arguments": fc.Arguments},
			map[string]any{"type": "function_call_output", "call_id": fc.CallID, "output": "ok"})
	}

	var final *responsesReply
	for _, ev := range responsesEvents(t, post(t, srv.URL()+"/v1/responses", responsesBody(true, input))) {
		if ev.Type == "response.completed" {
			r := ev.Response
			final = &r
		}
	}
	if final == nil || final.outputText() != "All done: wrote a.txt." || len(final.Output) != 1 {
		t.Fatalf("final %+v", final)
	}
	if r := lastReq(t, srv); r.AssistantTurns != 1 || r.Step != 1 || r.API != apiResponses || !r.Stream {
		t.Errorf("log %+v", r)
	}
}

func TestResponsesNonStreaming(t *testing.T) {
	srv, _ := startServer(t, twoSteps())
	res := post(t, srv.URL()+"/v1/responses", responsesBody(false, []any{inputMessage("user", "go")}))
	var resp responsesReply
	if err := json.Unmarshal(res.body, &resp); err != nil || res.status != 200 {
		t.Fatalf("status %d: %v: %s", res.status, err, res.body)
	}
	if len(resp.Output) != 2 || resp.Output[1].Type != "function_call" || resp.Usage == nil || resp.Usage.TotalTokens <= 0 {
		t.Fatalf("response %+v", resp)
	}
	fc := resp.Output[1]
	if !json.Valid([]byte(fc.Arguments)) || fc.Name != "write_file" {
		t.Errorf("function call %+v", fc)
	}
}

func TestResponsesTurnCounting(t *testing.T) {
	msg := func(role string) responsesItem { return responsesItem{Type: "message", Role: role} }
	fc := func(id string) responsesItem { return responsesItem{Type: "function_call", CallID: id} }
	out := func(id string) responsesItem { return responsesItem{Type: "function_call_output", CallID: id} }
	const a, b = "call_AAAAAAAAAAAAAAAA_0", "call_AAAAAAAAAAAAAAAA_1"
	const c = "call_BBBBBBBBBBBBBBBB_0"
	cases := []struct {
		name  string
		items []responsesItem
		want  int
	}{
		{"empty", nil, 0},
		{"user only", []responsesItem{msg("developer"), msg("user")}, 0},
		{"easy message", []responsesItem{{Role: "user"}, {Role: "assistant"}, {Role: "user"}}, 1},
		{"grouped calls", []responsesItem{msg("user"), msg("assistant"), fc(a), fc(b), out(a), out(b)}, 1},
		{"interleaved calls one response", []responsesItem{msg("user"), msg("assistant"), fc(a), out(a), fc(b), out(b)}, 1},
		{"reasoning then call", []responsesItem{msg("user"), {Type: "reasoning"}, fc(a), out(a), fc(b), out(b), fc(c), out(c)}, 2},
		{"foreign ids", []responsesItem{msg("user"), fc("call_x"), out("call_x"), fc("call_y"), out("call_y")}, 2},
		{"user message resets", []responsesItem{msg("user"), fc(a), out(a), msg("user"), fc(b), out(b)}, 2},
		{"custom tool", []responsesItem{msg("user"), {Type: "custom_tool_call", CallID: a}, {Type: "custom_tool_call_output", CallID: a}, msg("assistant")}, 2},
	}
	for _, tc := range cases {
		if got := responsesTurns(tc.items); got != tc.want {
			t.Errorf("%s: %d turns, want %d", tc.name, got, tc.want)
		}
	}
}

// A tool declared as a Codex "custom" (free-form) tool gets a custom_tool_call.
func TestResponsesCustomTool(t *testing.T) {
	srv, _ := startServer(t, &Script{Steps: []Step{{ToolCalls: []ToolCall{{Name: "apply_patch", Input: json.RawMessage(`"*** Begin Patch\n*** End Patch\n"`)}}}}})
	body := `{"model":"gpt-5","stream":true,"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"x"}]}],"tools":[{"type":"custom","name":"apply_patch","format":{"type":"grammar"}}]}`
	res := post(t, srv.URL()+"/v1/responses", body)
	var item map[string]any
	for _, ev := range parseSSE(t, res.body) {
		if ev.name == "response.output_item.done" {
			item = decode(t, []byte(ev.data))["item"].(map[string]any)
		}
	}
	if item["type"] != "custom_tool_call" || item["input"] != "*** Begin Patch\n*** End Patch\n" || item["name"] != "apply_patch" {
		t.Errorf("item %v", item)
	}
}

// chatBody is a Chat Completions request with one write_file tool.
func chatBody(stream bool, msgs []any) string {
	body := map[string]any{
		"model":    "gpt-5",
		"messages": msgs,
		"tools":    []any{map[string]any{"type": "function", "function": map[string]any{"name": "write_file", "parameters": writeFileSchema}}},
	}
	if stream {
		body["stream"] = true
		body["stream_options"] = map[string]any{"include_usage": true}
	}
	return mustJSON(body)
}

type chatToolCall struct {
	Index    int    `json:"index"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type chatUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// chatCompletion is a Chat Completions reply; a stream's chunks are folded
// into one by accumulateChat.
type chatCompletion struct {
	Choices []struct {
		FinishReason string `json:"finish_reason"`
		Message      struct {
			Role      string         `json:"role"`
			Content   string         `json:"content"`
			ToolCalls []chatToolCall `json:"tool_calls"`
		} `json:"message"`
	} `json:"choices"`
	Usage *chatUsage `json:"usage"`
}

// accumulateChat folds a chunk stream into the completion it describes,
// as a client does: content deltas appended, tool calls by index with
// their arguments appended, the finish reason and usage kept.
func accumulateChat(t *testing.T, res httpResult) chatCompletion {
	t.Helper()
	if res.status != 200 {
		t.Fatalf("status %d: %s", res.status, res.body)
	}
	evs := parseSSE(t, res.body)
	if evs[len(evs)-1].data != "[DONE]" {
		t.Fatalf("stream does not end with [DONE]: %+v", evs[len(evs)-1])
	}
	var out chatCompletion
	if err := json.Unmarshal([]byte(`{"choices":[{}]}`), &out); err != nil {
		t.Fatal(err)
	}
	ch := &out.Choices[0]
	for _, ev := range evs[:len(evs)-1] {
		var chunk struct {
			Choices []struct {
				FinishReason *string `json:"finish_reason"`
				Delta        struct {
					Content   *string        `json:"content"`
					ToolCalls []chatToolCall `json:"tool_calls"`
				} `json:"delta"`
			} `json:"choices"`
			Usage *chatUsage `json:"usage"`
		}
		if err := json.Unmarshal([]byte(ev.data), &chunk); err != nil {
			t.Fatalf("chunk: %v: %s", err, ev.data)
		}
		if chunk.Usage != nil {
			out.Usage = chunk.Usage
		}
		for _, c := range chunk.Choices {
			if c.Delta.Content != nil {
				ch.Message.Content += *c.Delta.Content
			}
			for _, tc := range c.Delta.ToolCalls {
				if tc.Index == len(ch.Message.ToolCalls) {
					ch.Message.ToolCalls = append(ch.Message.ToolCalls, tc)
					continue
				}
				if tc.Index != len(ch.Message.ToolCalls)-1 || tc.ID != "" {
					t.Fatalf("tool call delta out of order: %+v", tc)
				}
				ch.Message.ToolCalls[tc.Index].Function.Arguments += tc.Function.Arguments
			}
			if c.FinishReason != nil {
				ch.FinishReason = *c.FinishReason
			}
		}
	}
	return out
}

func TestChatStreamingRoundTrip(t *testing.T) {
	script := twoSteps()
	script.Steps[0].ToolCalls = append(script.Steps[0].ToolCalls, ToolCall{Name: "write_file", Input: json.RawMessage(`{"path":"b.txt","content":"b"}`)})
	srv, _ := startServer(t, script)

	msgs := []any{map[string]any{"role": "system", "content": "You are a test."}, map[string]any{"role": "user", "content": "write a.txt"}}
	acc := accumulateChat(t, post(t, srv.URL()+"/v1/chat/completions", chatBody(true, msgs)))
	if len(acc.Choices) != 1 {
		t.Fatalf("choices %+v", acc.Choices)
	}
	ch := acc.Choices[0]
	if ch.FinishReason != "tool_calls" || ch.Message.Content != "I will write the file now." || len(ch.Message.ToolCalls) != 2 {
		t.Fatalf("choice %+v", ch)
	}
	if acc.Usage == nil || acc.Usage.PromptTokens <= 0 || acc.Usage.CompletionTokens <= 0 {
		t.Errorf("usage %+v", acc.Usage)
	}
	msgs = append(msgs, map[string]any{"role": "assistant", "content": ch.Message.Content, "tool_calls": ch.Message.ToolCalls})
	for _, tc := range ch.Message.ToolCalls {
		var args map[string]string
		if err := json.Unmarshal([]byte(tc.Function.Arguments), &args); err != nil || args["path"] == "" {
			t.Fatalf("arguments %q: %v", tc.Function.Arguments, err)
		}
		if !strings.HasPrefix(tc.ID, "call_") || tc.Type != "function" || tc.Function.Name != "write_file" {
			t.Errorf("tool call %+v", tc)
		}
		msgs = append(msgs, map[string]any{"role": "tool", "content": "ok", "tool_call_id": tc.ID})
	}
	acc = accumulateChat(t, post(t, srv.URL()+"/v1/chat/completions", chatBody(true, msgs)))
	if acc.Choices[0].FinishReason != "stop" || acc.Choices[0].Message.Content != "All done: wrote a.txt." {
		t.Errorf("final %+v", acc.Choices[0])
	}
	if r := lastReq(t, srv); r.AssistantTurns != 1 || r.Step != 1 || r.API != APIChat {
		t.Errorf("log %+v", r)
	}
}

func chatReply(t *testing.T, res httpResult) chatCompletion {
	t.Helper()
	var c chatCompletion
	if err := json.Unmarshal(res.body, &c); err != nil || res.status != 200 || len(c.Choices) != 1 {
		t.Fatalf("status %d: %v: %s", res.status, err, res.body)
	}
	return c
}

func TestChatNonStreaming(t *testing.T) {
	srv, _ := startServer(t, twoSteps())
	c := chatReply(t, post(t, srv.URL()+"/v1/chat/completions", chatBody(false, []any{map[string]any{"role": "user", "content": "go"}})))
	if c.Choices[0].FinishReason != "tool_calls" || len(c.Choices[0].Message.ToolCalls) != 1 || c.Usage == nil || c.Usage.TotalTokens <= 0 {
		t.Fatalf("completion %+v", c)
	}
	// Raw stream without include_usage ends with [DONE] and has no usage chunk.
	body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"write_file"}}]}`
	evs := parseSSE(t, post(t, srv.URL()+"/v1/chat/completions", body).body)
	if evs[len(evs)-1].data != "[DONE]" || strings.Contains(evs[len(evs)-2].data, "usage") {
		t.Errorf("stream tail %+v", evs[len(evs)-2:])
	}
}

func TestModels(t *testing.T) {
	srv, _ := startServer(t, twoSteps())
	res := get(t, srv.URL()+"/v1/models")
	var page struct {
		Object string `json:"object"`
		Data   []struct {
			ID     string `json:"id"`
			Object string `json:"object"`
		} `json:"data"`
	}
	if err := json.Unmarshal(res.body, &page); err != nil || res.status != 200 || page.Object != "list" {
		t.Fatalf("status %d: %v: %s", res.status, err, res.body)
	}
	if len(page.Data) < 2 || page.Data[0].ID == "" || page.Data[0].Object != "model" {
		t.Errorf("models %+v", page.Data)
	}
	res = get(t, srv.URL()+"/v1/models/anything")
	if m := decode(t, res.body); res.status != 200 || m["id"] != "anything" || m["object"] != "model" {
		t.Errorf("model %d %s", res.status, res.body)
	}
}

func TestOpenAIRateLimitThenSuccess(t *testing.T) {
	script := twoSteps()
	script.Steps[0].Status = 429
	srv, _ := startServer(t, script)
	body := `{"model":"m","stream":true,"input":"hi","tools":[{"type":"function","name":"write_file"}]}`
	res := post(t, srv.URL()+"/v1/responses", body)
	e, _ := decode(t, res.body)["error"].(map[string]any)
	if res.status != 429 || res.header.Get("Retry-After") != "0" || e["type"] != "rate_limit_exceeded" || e["code"] != "rate_limit_exceeded" || e["message"] == "" {
		t.Fatalf("status %d body %s", res.status, res.body)
	}
	if res := post(t, srv.URL()+"/v1/responses", body); res.status != 200 {
		t.Fatalf("second status %d", res.status)
	}

	// A client retrying on 5xx gets the step on its third try.
	script = twoSteps()
	script.Steps[0].Status = 500
	script.Steps[0].Times = 2
	srv, _ = startServer(t, script)
	body = chatBody(false, []any{map[string]any{"role": "user", "content": "go"}})
	for range 2 {
		if res := post(t, srv.URL()+"/v1/chat/completions", body); res.status != 500 {
			t.Fatalf("status %d: %s", res.status, res.body)
		}
	}
	if c := chatReply(t, post(t, srv.URL()+"/v1/chat/completions", body)); c.Choices[0].FinishReason != "tool_calls" {
		t.Errorf("completion %+v", c)
	}
	reqs := srv.Requests()
	if len(reqs) != 3 || reqs[0].Status != 500 || reqs[1].Status != 500 || reqs[2].Status != 200 {
		t.Errorf("requests %+v", reqs)
	}
}
