package llm

import (
	"context"
	"errors"
	"strings"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
)

// AnthropicProvider talks to the Anthropic Messages API (non-streaming).
type AnthropicProvider struct {
	client anthropic.Client
}

// defaultAnthropicMaxTokens is max_tokens when Request.MaxTokens is 0.
const defaultAnthropicMaxTokens = 8192

// newAnthropic builds an Anthropic Messages provider. The SDK's own retries
// are off.
func newAnthropic(cfg Config) *AnthropicProvider {
	base := strings.TrimRight(cfg.BaseURL, "/")
	base = strings.TrimSuffix(base, "/v1") // the SDK adds v1/messages
	if base == "" {
		base = DefaultBaseURL(Anthropic)
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
	return &AnthropicProvider{client: anthropic.NewClient(opts...)}
}

func (p *AnthropicProvider) Name() string { return Anthropic }

func (p *AnthropicProvider) Complete(ctx context.Context, req Request) (Response, error) {
	maxTok := int64(req.MaxTokens)
	if maxTok <= 0 {
		maxTok = defaultAnthropicMaxTokens
	}
	params := anthropic.MessageNewParams{
		Model:     anthropic.Model(req.Model),
		MaxTokens: maxTok,
	}
	if req.System != "" {
		params.System = []anthropic.TextBlockParam{{Text: req.System}}
	}
	for _, t := range req.Tools {
		params.Tools = append(params.Tools, anthropic.ToolUnionParam{OfTool: anthropicTool(t)})
	}
	for _, m := range req.Messages {
		var blocks []anthropic.ContentBlockParamUnion
		if m.Text != "" {
			blocks = append(blocks, anthropic.NewTextBlock(m.Text))
		}
		for _, tc := range m.ToolCalls {
			blocks = append(blocks, anthropic.NewToolUseBlock(tc.ID, validJSONObject(tc.Input), tc.Name))
		}
		for _, tr := range m.ToolResults {
			content := tr.Content
			if content == "" {
				content = "(no output)"
			}
			blocks = append(blocks, anthropic.NewToolResultBlock(tr.CallID, content, tr.IsError))
		}
		if len(blocks) == 0 {
			blocks = append(blocks, anthropic.NewTextBlock("(empty)"))
		}
		if m.Role == RoleAssistant {
			params.Messages = append(params.Messages, anthropic.NewAssistantMessage(blocks...))
		} else {
			params.Messages = append(params.Messages, anthropic.NewUserMessage(blocks...))
		}
	}
	msg, err := p.client.Messages.New(ctx, params)
	if err != nil {
		return Response{}, anthropicErr(err)
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
	out.StopReason = string(msg.StopReason)
	out.Usage = Usage{
		InputTokens:      msg.Usage.InputTokens,
		OutputTokens:     msg.Usage.OutputTokens,
		CacheReadTokens:  msg.Usage.CacheReadInputTokens,
		CacheWriteTokens: msg.Usage.CacheCreationInputTokens,
	}
	return out, nil
}

func anthropicTool(t Tool) *anthropic.ToolParam {
	schema := anthropic.ToolInputSchemaParam{ExtraFields: map[string]any{}}
	for k, v := range t.Schema {
		switch k {
		case "type":
		case "properties":
			schema.Properties = v
		case "required":
			switch r := v.(type) {
			case []string:
				schema.Required = r
			case []any:
				for _, s := range r {
					if str, ok := s.(string); ok {
						schema.Required = append(schema.Required, str)
					}
				}
			}
		default:
			schema.ExtraFields[k] = v
		}
	}
	if schema.Properties == nil {
		schema.Properties = map[string]any{}
	}
	tp := &anthropic.ToolParam{Name: t.Name, InputSchema: schema}
	if t.Description != "" {
		tp.Description = anthropic.String(t.Description)
	}
	return tp
}

// validJSONObject returns in when it is valid JSON, else {} (a weak model's
// broken arguments must not make the next request unsendable).
func validJSONObject(in []byte) any {
	raw := inputOrEmpty(in)
	if !jsonValid(raw) {
		return map[string]any{}
	}
	return raw
}

func anthropicErr(err error) error {
	var ae *anthropic.Error
	if errors.As(err, &ae) && ae.Response != nil {
		return httpError(Anthropic, ae.StatusCode, ae.Response.Header, ae.RawJSON())
	}
	return err
}
