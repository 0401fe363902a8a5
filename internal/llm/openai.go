package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/shared"
)

// OpenAIProvider talks to an OpenAI-compatible Chat Completions API
// (OpenAI, Ollama at http://127.0.0.1:11434/v1, vLLM, ...), non-streaming.
type OpenAIProvider struct {
	client openai.Client
}

// newOpenAI builds a Chat Completions provider. The SDK's own retries are
// off.
func newOpenAI(cfg Config) *OpenAIProvider {
	base := strings.TrimRight(cfg.BaseURL, "/")
	if base == "" {
		base = DefaultBaseURL(OpenAI)
	}
	key := cfg.APIKey
	if key == "" {
		key = placeholderKey
	}
	opts := []option.RequestOption{
		option.WithBaseURL(base + "/"),
		option.WithAPIKey(key),
		option.WithMaxRetries(0),
	}
	if cfg.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(cfg.HTTPClient))
	}
	if cfg.Timeout > 0 {
		opts = append(opts, option.WithRequestTimeout(cfg.Timeout))
	}
	return &OpenAIProvider{client: openai.NewClient(opts...)}
}

func (p *OpenAIProvider) Name() string { return OpenAI }

func (p *OpenAIProvider) Complete(ctx context.Context, req Request) (Response, error) {
	params := openai.ChatCompletionNewParams{Model: shared.ChatModel(req.Model)}
	if req.MaxTokens > 0 {
		params.MaxCompletionTokens = param.NewOpt(int64(req.MaxTokens))
	}
	if req.System != "" {
		params.Messages = append(params.Messages, openai.SystemMessage(req.System))
	}
	for _, t := range req.Tools {
		fd := shared.FunctionDefinitionParam{Name: t.Name, Parameters: shared.FunctionParameters(t.Schema)}
		if t.Description != "" {
			fd.Description = param.NewOpt(t.Description)
		}
		params.Tools = append(params.Tools, openai.ChatCompletionFunctionTool(fd))
	}
	for _, m := range req.Messages {
		if m.Role == RoleAssistant {
			am := openai.ChatCompletionAssistantMessageParam{}
			if m.Text != "" || len(m.ToolCalls) == 0 {
				am.Content.OfString = param.NewOpt(m.Text)
			}
			for _, tc := range m.ToolCalls {
				am.ToolCalls = append(am.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
						ID: tc.ID,
						Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{
							Name:      tc.Name,
							Arguments: string(inputOrEmpty(tc.Input)),
						},
					},
				})
			}
			params.Messages = append(params.Messages, openai.ChatCompletionMessageParamUnion{OfAssistant: &am})
			continue
		}
		// Tool results first: they must directly follow the assistant
		// message that asked for them.
		for _, tr := range m.ToolResults {
			content := tr.Content
			if tr.IsError {
				content = "ERROR: " + content
			}
			if content == "" {
				content = "(no output)"
			}
			params.Messages = append(params.Messages, openai.ToolMessage(content, tr.CallID))
		}
		if m.Text != "" {
			params.Messages = append(params.Messages, openai.UserMessage(m.Text))
		}
	}
	cc, err := p.client.Chat.Completions.New(ctx, params)
	if err != nil {
		return Response{}, openaiErr(err)
	}
	out := Response{Usage: Usage{
		InputTokens:     cc.Usage.PromptTokens,
		OutputTokens:    cc.Usage.CompletionTokens,
		CacheReadTokens: cc.Usage.PromptTokensDetails.CachedTokens,
	}}
	if len(cc.Choices) == 0 {
		return out, &APIError{Provider: OpenAI, Status: 200, Message: "response has no choices"}
	}
	ch := cc.Choices[0]
	out.Text = ch.Message.Content
	if out.Text == "" && ch.Message.Refusal != "" {
		out.Text = ch.Message.Refusal
	}
	for i, tc := range ch.Message.ToolCalls {
		if tc.Type != "" && tc.Type != "function" {
			continue
		}
		id := tc.ID
		if id == "" {
			id = fmt.Sprintf("call_%d", i)
		}
		out.ToolCalls = append(out.ToolCalls, ToolCall{ID: id, Name: tc.Function.Name, Input: inputOrEmpty(json.RawMessage(tc.Function.Arguments))})
	}
	switch ch.FinishReason {
	case "stop":
		out.StopReason = StopEnd
	case "tool_calls", "function_call":
		out.StopReason = StopToolUse
	case "length":
		out.StopReason = StopMaxTokens
	default:
		out.StopReason = ch.FinishReason
	}
	if len(out.ToolCalls) > 0 && out.StopReason == StopEnd {
		out.StopReason = StopToolUse // Ollama says "stop" even with tool calls
	}
	return out, nil
}

func openaiErr(err error) error {
	var oe *openai.Error
	if errors.As(err, &oe) && oe.Response != nil {
		raw := oe.RawJSON()
		if raw == "" && oe.Message != "" {
			b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": oe.Message, "type": oe.Type}})
			raw = string(b)
		}
		return httpError(OpenAI, oe.StatusCode, oe.Response.Header, raw)
	}
	return err
}

func jsonValid(b []byte) bool { return json.Valid(b) }
