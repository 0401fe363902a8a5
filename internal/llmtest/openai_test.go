package llmtest

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
)

func openaiClient(srv *Server) openai.Client {
	return openai.NewClient(option.WithBaseURL(srv.URL()+"/v1/"), option.WithAPIKey("test-key"), option.WithMaxRetries(3))
}

var writeFileSchema = map[string]any{
	"type":       "object",
	"properties": map[string]any{"path": map[string]any{"type": "string"}, "content": map[string]any{"type": "string"}},
}

func responsesParams(input responses.ResponseInputParam) responses.ResponseNewParams {
	return responses.ResponseNewParams{
		Model:        "gpt-5",
		Instructions: openai.String("You are a test."),
		Input:        responses.ResponseNewParamsInputUnion{OfInputItemList: input},
		Tools:        []responses.ToolUnionParam{responses.ToolParamOfFunction("write_file", writeFileSchema, false)},
	}
}

func functionOutput(callID, output string) responses.ResponseInputItemUnionParam {
	item := responses.ResponseInputItemParamOfFunctionCallOutput(output)
	item.OfFunctionCallOutput.CallID = openai.String(callID)
	return item
}

func TestResponsesStreamingRoundTrip(t *testing.T) {
	script := twoSteps()
	script.Steps[0].ToolCalls = append(script.Steps[0].ToolCalls, ToolCall{Name: "write_file", Input: json.RawMessage(`{"path":"b.txt","content":"b"}`)})
	srv, _ := startServer(t, script)
	client := openaiClient(srv)
	ctx := context.Background()

	input := responses.ResponseInputParam{responses.ResponseInputItemParamOfMessage("write a.txt", responses.EasyInputMessageRoleUser)}
	stream := client.Responses.NewStreaming(ctx, responsesParams(input))
	var done []responses.ResponseOutputItemUnion
	var completed *responses.Response
	var text strings.Builder
	var types []string
	seq := int64(0)
	for stream.Next() {
		ev := stream.Current()
		types = append(types, ev.Type)
		if ev.SequenceNumber != seq {
			t.Errorf("event %s has sequence_number %d, want %d", ev.Type, ev.SequenceNumber, seq)
		}
		seq++
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
	if err := stream.Err(); err != nil {
		t.Fatal(err)
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
	if completed == nil || completed.Status != "completed" || completed.Usage.InputTokens <= 0 || completed.Usage.OutputTokens <= 0 ||
		completed.Usage.TotalTokens != completed.Usage.InputTokens+completed.Usage.OutputTokens {
		t.Fatalf("completed %+v", completed)
	}
	if completed.OutputText() != "I will write the file now." || len(completed.Output) != 3 {
		t.Errorf("completed output %+v", completed.Output)
	}
	if len(done) != 3 || done[0].Type != "message" || done[1].Type != "function_call" || done[2].Type != "function_call" {
		t.Fatalf("items %+v", done)
	}
	// Codex-style history: message, then call/output pairs interleaved.
	input = append(input, responses.ResponseInputItemParamOfMessage(done[0].AsMessage().Content[0].Text, responses.EasyInputMessageRoleAssistant))
	for _, it := range done[1:] {
		fc := it.AsFunctionCall()
		var args map[string]string
		if err := json.Unmarshal([]byte(fc.Arguments), &args); err != nil || args["path"] == "" {
			t.Fatalf("arguments %q: %v", fc.Arguments, err)
		}
		if fc.Name != "write_file" || !strings.HasPrefix(fc.CallID, "call_") {
			t.Errorf("function call %+v", fc)
		}
		input = append(input, responses.ResponseInputItemParamOfFunctionCall(fc.Arguments, fc.CallID, fc.Name), functionOutput(fc.CallID, "ok"))
	}

	stream = client.Responses.NewStreaming(ctx, responsesParams(input))
	var final *responses.Response
	for stream.Next() {
		if ev := stream.Current(); ev.Type == "response.completed" {
			r := ev.Response
			final = &r
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if final == nil || final.OutputText() != "All done: wrote a.txt." || len(final.Output) != 1 {
		t.Fatalf("final %+v", final)
	}
	if r := lastReq(t, srv); r.AssistantTurns != 1 || r.Step != 1 || r.API != apiResponses || !r.Stream {
		t.Errorf("log %+v", r)
	}
}

func TestResponsesNonStreaming(t *testing.T) {
	srv, _ := startServer(t, twoSteps())
	client := openaiClient(srv)
	resp, err := client.Responses.New(context.Background(), responsesParams(responses.ResponseInputParam{
		responses.ResponseInputItemParamOfMessage("go", responses.EasyInputMessageRoleUser),
	}))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Output) != 2 || resp.Output[1].Type != "function_call" || resp.Usage.TotalTokens <= 0 {
		t.Fatalf("response %+v", resp)
	}
	fc := resp.Output[1].AsFunctionCall()
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

func chatParams(msgs []openai.ChatCompletionMessageParamUnion) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:         "gpt-5",
		Messages:      msgs,
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
		Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name: "write_file", Parameters: writeFileSchema,
		})},
	}
}

func TestChatStreamingRoundTrip(t *testing.T) {
	script := twoSteps()
	script.Steps[0].ToolCalls = append(script.Steps[0].ToolCalls, ToolCall{Name: "write_file", Input: json.RawMessage(`{"path":"b.txt","content":"b"}`)})
	srv, _ := startServer(t, script)
	client := openaiClient(srv)
	ctx := context.Background()

	msgs := []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("You are a test."), openai.UserMessage("write a.txt")}
	stream := client.Chat.Completions.NewStreaming(ctx, chatParams(msgs))
	acc := openai.ChatCompletionAccumulator{}
	var finished []openai.FinishedChatCompletionToolCall
	for stream.Next() {
		acc.AddChunk(stream.Current())
		if tc, ok := acc.JustFinishedToolCall(); ok {
			finished = append(finished, tc)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if len(acc.Choices) != 1 {
		t.Fatalf("choices %+v", acc.Choices)
	}
	ch := acc.Choices[0]
	if ch.FinishReason != "tool_calls" || ch.Message.Content != "I will write the file now." || len(ch.Message.ToolCalls) != 2 {
		t.Fatalf("choice %+v", ch)
	}
	if acc.Usage.PromptTokens <= 0 || acc.Usage.CompletionTokens <= 0 {
		t.Errorf("usage %+v", acc.Usage)
	}
	if len(finished) != 2 {
		t.Errorf("finished tool calls %+v", finished)
	}
	msgs = append(msgs, ch.Message.ToParam())
	for _, tc := range ch.Message.ToolCalls {
		var args map[string]string
		if err := json.Unmarshal([]byte(tc.Function.Arguments), &args); err != nil || args["path"] == "" {
			t.Fatalf("arguments %q: %v", tc.Function.Arguments, err)
		}
		msgs = append(msgs, openai.ToolMessage("ok", tc.ID))
	}
	stream = client.Chat.Completions.NewStreaming(ctx, chatParams(msgs))
	acc = openai.ChatCompletionAccumulator{}
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if acc.Choices[0].FinishReason != "stop" || acc.Choices[0].Message.Content != "All done: wrote a.txt." {
		t.Errorf("final %+v", acc.Choices[0])
	}
	if r := lastReq(t, srv); r.AssistantTurns != 1 || r.Step != 1 || r.API != APIChat {
		t.Errorf("log %+v", r)
	}
}

func TestChatNonStreaming(t *testing.T) {
	srv, _ := startServer(t, twoSteps())
	client := openaiClient(srv)
	c, err := client.Chat.Completions.New(context.Background(), chatParams([]openai.ChatCompletionMessageParamUnion{openai.UserMessage("go")}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Choices[0].FinishReason != "tool_calls" || len(c.Choices[0].Message.ToolCalls) != 1 || c.Usage.TotalTokens <= 0 {
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
	client := openaiClient(srv)
	page, err := client.Models.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Data) < 2 || page.Data[0].ID == "" {
		t.Errorf("models %+v", page.Data)
	}
	m, err := client.Models.Get(context.Background(), "anything")
	if err != nil || m.ID != "anything" {
		t.Errorf("model %+v %v", m, err)
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

	// Through the SDK, which retries.
	script = twoSteps()
	script.Steps[0].Status = 500
	script.Steps[0].Times = 2
	srv, _ = startServer(t, script)
	client := openaiClient(srv)
	c, err := client.Chat.Completions.New(context.Background(), chatParams([]openai.ChatCompletionMessageParamUnion{openai.UserMessage("go")}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Choices[0].FinishReason != "tool_calls" {
		t.Errorf("completion %+v", c)
	}
	reqs := srv.Requests()
	if len(reqs) != 3 || reqs[0].Status != 500 || reqs[1].Status != 500 || reqs[2].Status != 200 {
		t.Errorf("requests %+v", reqs)
	}
}
