package llm

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
)

// OpenAIProvider talks to an OpenAI-compatible Chat Completions API
// (OpenAI, Ollama at http://127.0.0.1:11434/v1, vLLM, ...), non-streaming.
type OpenAIProvider struct {
	api endpoint
}

// newOpenAI builds a Chat Completions provider.
func newOpenAI(cfg Config) *OpenAIProvider {
	base := strings.TrimRight(cfg.BaseURL, "/")
	if base == "" {
		base = DefaultBaseURL(OpenAI)
	}
	key := cfg.APIKey
	if key == "" {
		key = placeholderKey
	}
	return &OpenAIProvider{api: endpoint{
		provider: OpenAI,
		url:      base + "/chat/completions",
		header:   map[string]string{"Authorization": "Bearer " + key},
		client:   cfg.HTTPClient,
		timeout:  cfg.Timeout,
	}}
}

func (p *OpenAIProvider) Name() string { return OpenAI }

// The request and response bodies, as far as ralph uses them.
type (
	chatFunction struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
	chatToolCall struct {
		ID       string       `json:"id"`
		Type     string       `json:"type"`
		Function chatFunction `json:"function"`
	}
	chatMessage struct {
		Role       string         `json:"role"`
		Content    *string        `json:"content,omitempty"`
		ToolCalls  []chatToolCall `json:"tool_calls,omitempty"`
		ToolCallID string         `json:"tool_call_id,omitempty"`
	}
	chatTool struct {
		Type     string `json:"type"`
		Function struct {
			Name        string         `json:"name"`
			Description string         `json:"description,omitempty"`
			Parameters  map[string]any `json:"parameters"`
		} `json:"function"`
	}
	chatRequest struct {
		Model               string        `json:"model"`
		Messages            []chatMessage `json:"messages"`
		Tools               []chatTool    `json:"tools,omitempty"`
		MaxCompletionTokens int           `json:"max_completion_tokens,omitempty"`
	}
	chatResponse struct {
		Choices []struct {
			FinishReason string `json:"finish_reason"`
			Message      struct {
				Content   string         `json:"content"`
				Refusal   string         `json:"refusal"`
				ToolCalls []chatToolCall `json:"tool_calls"`
			} `json:"message"`
		} `json:"choices"`
		Usage struct {
			PromptTokens        int64 `json:"prompt_tokens"`
			CompletionTokens    int64 `json:"completion_tokens"`
			PromptTokensDetails struct {
				CachedTokens int64 `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
	}
)

func text(s string) *string { return &s }

func (p *OpenAIProvider) Complete(ctx context.Context, req Request) (Response, error) {
	body := chatRequest{Model: req.Model, MaxCompletionTokens: max(req.MaxTokens, 0)}
	if req.System != "" {
		body.Messages = append(body.Messages, chatMessage{Role: "system", Content: text(req.System)})
	}
	for _, t := range req.Tools {
		ct := chatTool{Type: "function"}
		ct.Function.Name, ct.Function.Description, ct.Function.Parameters = t.Name, t.Description, objectSchema(t.Schema)
		body.Tools = append(body.Tools, ct)
	}
	for _, m := range req.Messages {
		if m.Role == RoleAssistant {
			am := chatMessage{Role: "assistant"}
			if m.Text != "" || len(m.ToolCalls) == 0 {
				am.Content = text(m.Text)
			}
			for _, tc := range m.ToolCalls {
				am.ToolCalls = append(am.ToolCalls, chatToolCall{ID: tc.ID, Type: "function",
					Function: chatFunction{Name: tc.Name, Arguments: string(inputOrEmpty(tc.Input))}})
			}
			body.Messages = append(body.Messages, am)
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
			body.Messages = append(body.Messages, chatMessage{Role: "tool", Content: text(content), ToolCallID: tr.CallID})
		}
		if m.Text != "" {
			body.Messages = append(body.Messages, chatMessage{Role: "user", Content: text(m.Text)})
		}
	}
	var cc chatResponse
	if err := p.api.post(ctx, body, &cc); err != nil {
		return Response{}, err
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
