package llm

import (
	"context"
	"encoding/json"
	"strings"
)

// AnthropicProvider talks to the Anthropic Messages API
// (POST /v1/messages, non-streaming).
type AnthropicProvider struct {
	api endpoint
}

// defaultAnthropicMaxTokens is max_tokens when Request.MaxTokens is 0.
const defaultAnthropicMaxTokens = 8192

// anthropicVersion is the API version header every request carries.
const anthropicVersion = "2023-06-01"

// newAnthropic builds an Anthropic Messages provider.
func newAnthropic(cfg Config) *AnthropicProvider {
	base := strings.TrimRight(cfg.BaseURL, "/")
	base = strings.TrimSuffix(base, "/v1") // the path below adds it
	if base == "" {
		base = DefaultBaseURL(Anthropic)
	}
	key := cfg.APIKey
	if key == "" {
		key = placeholderKey
	}
	return &AnthropicProvider{api: endpoint{
		provider: Anthropic,
		url:      base + "/v1/messages",
		header:   map[string]string{"X-Api-Key": key, "Anthropic-Version": anthropicVersion},
		client:   cfg.HTTPClient,
		timeout:  cfg.Timeout,
	}}
}

func (p *AnthropicProvider) Name() string { return Anthropic }

// The request and response bodies, as far as ralph uses them.
type (
	anthropicBlock struct {
		Type      string          `json:"type"`
		Text      string          `json:"text,omitempty"`
		ID        string          `json:"id,omitempty"`
		Name      string          `json:"name,omitempty"`
		Input     json.RawMessage `json:"input,omitempty"`
		ToolUseID string          `json:"tool_use_id,omitempty"`
		Content   string          `json:"content,omitempty"`
		IsError   bool            `json:"is_error,omitempty"`
	}
	anthropicMessage struct {
		Role    Role             `json:"role"`
		Content []anthropicBlock `json:"content"`
	}
	anthropicTool struct {
		Name        string         `json:"name"`
		Description string         `json:"description,omitempty"`
		InputSchema map[string]any `json:"input_schema"`
	}
	anthropicRequest struct {
		Model     string             `json:"model"`
		MaxTokens int                `json:"max_tokens"`
		System    []anthropicBlock   `json:"system,omitempty"`
		Messages  []anthropicMessage `json:"messages"`
		Tools     []anthropicTool    `json:"tools,omitempty"`
	}
	anthropicResponse struct {
		Content    []anthropicBlock `json:"content"`
		StopReason string           `json:"stop_reason"`
		Usage      struct {
			InputTokens              int64 `json:"input_tokens"`
			OutputTokens             int64 `json:"output_tokens"`
			CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
			CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
		} `json:"usage"`
	}
)

func (p *AnthropicProvider) Complete(ctx context.Context, req Request) (Response, error) {
	body := anthropicRequest{Model: req.Model, MaxTokens: req.MaxTokens}
	if body.MaxTokens <= 0 {
		body.MaxTokens = defaultAnthropicMaxTokens
	}
	if req.System != "" {
		body.System = []anthropicBlock{{Type: "text", Text: req.System}}
	}
	for _, t := range req.Tools {
		body.Tools = append(body.Tools, anthropicTool{Name: t.Name, Description: t.Description, InputSchema: objectSchema(t.Schema)})
	}
	for _, m := range req.Messages {
		var blocks []anthropicBlock
		if m.Text != "" {
			blocks = append(blocks, anthropicBlock{Type: "text", Text: m.Text})
		}
		for _, tc := range m.ToolCalls {
			blocks = append(blocks, anthropicBlock{Type: "tool_use", ID: tc.ID, Name: tc.Name, Input: validJSONObject(tc.Input)})
		}
		for _, tr := range m.ToolResults {
			content := tr.Content
			if content == "" {
				content = "(no output)"
			}
			blocks = append(blocks, anthropicBlock{Type: "tool_result", ToolUseID: tr.CallID, Content: content, IsError: tr.IsError})
		}
		if len(blocks) == 0 {
			blocks = append(blocks, anthropicBlock{Type: "text", Text: "(empty)"})
		}
		role := RoleUser
		if m.Role == RoleAssistant {
			role = RoleAssistant
		}
		body.Messages = append(body.Messages, anthropicMessage{Role: role, Content: blocks})
	}
	var msg anthropicResponse
	if err := p.api.post(ctx, body, &msg); err != nil {
		return Response{}, err
	}
	var out Response
	var texts []string
	for _, b := range msg.Content {
		switch b.Type {
		case "text":
			if b.Text != "" {
				texts = append(texts, b.Text)
			}
		case "tool_use":
			out.ToolCalls = append(out.ToolCalls, ToolCall{ID: b.ID, Name: b.Name, Input: inputOrEmpty(b.Input)})
		}
	}
	out.Text = strings.Join(texts, "\n")
	out.StopReason = msg.StopReason
	out.Usage = Usage{
		InputTokens:      msg.Usage.InputTokens,
		OutputTokens:     msg.Usage.OutputTokens,
		CacheReadTokens:  msg.Usage.CacheReadInputTokens,
		CacheWriteTokens: msg.Usage.CacheCreationInputTokens,
	}
	return out, nil
}

// objectSchema is a tool's input schema as the APIs want it: an object
// schema with properties (an empty map when the tool takes none).
func objectSchema(s map[string]any) map[string]any {
	out := make(map[string]any, len(s)+2)
	for k, v := range s {
		out[k] = v
	}
	out["type"] = "object"
	if out["properties"] == nil {
		out["properties"] = map[string]any{}
	}
	return out
}

// validJSONObject returns in when it is valid JSON, else {} (a weak model's
// broken arguments must not make the next request unsendable).
func validJSONObject(in []byte) json.RawMessage {
	raw := inputOrEmpty(in)
	if !json.Valid(raw) {
		return json.RawMessage(`{}`)
	}
	return raw
}
