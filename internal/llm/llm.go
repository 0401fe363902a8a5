// Package llm is a small, provider-neutral client for chat models with tool
// use. A conversation (system text, messages carrying text, tool calls and
// tool results, tool definitions with JSON schemas) goes in; one assistant
// turn (text, tool calls, stop reason, token usage) comes out.
//
// Two providers implement it: Anthropic Messages and OpenAI-compatible Chat
// Completions (OpenAI, Ollama, vLLM, ...), each one JSON POST over net/http
// (no vendor SDK: the two SDKs were most of the time a fresh build of ralph
// took). Neither retries on its own: a 429 comes back as *RateLimitError and
// every other HTTP failure as *APIError, so the caller decides whether and
// when to try again.
package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Role of a message in the conversation.
type Role string

const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
)

// Message is one conversation entry. A user message carries Text and/or
// ToolResults; an assistant message carries Text and/or ToolCalls.
type Message struct {
	Role        Role
	Text        string
	ToolCalls   []ToolCall
	ToolResults []ToolResult
}

// ToolCall is the model asking for a tool to run.
type ToolCall struct {
	ID    string
	Name  string
	Input json.RawMessage // JSON object; may be invalid JSON from weak models
}

// ToolResult answers one ToolCall.
type ToolResult struct {
	CallID  string
	Name    string // the tool's name (some APIs want it)
	Content string
	IsError bool
}

// Tool is a tool definition offered to the model.
type Tool struct {
	Name        string
	Description string
	// Schema is the JSON schema of the input object
	// ({"type":"object","properties":{...},"required":[...]}).
	Schema map[string]any
}

// Request is one model call.
type Request struct {
	Model    string
	System   string
	Messages []Message
	Tools    []Tool
	// MaxTokens caps the reply. 0 = provider default (Anthropic: 8192,
	// OpenAI-compatible: not sent, the server decides).
	MaxTokens int
}

// Stop reasons, normalised. Unknown provider values are passed through.
const (
	StopEnd       = "end_turn"
	StopToolUse   = "tool_use"
	StopMaxTokens = "max_tokens"
)

// Usage is token accounting for one call.
type Usage struct {
	InputTokens      int64
	OutputTokens     int64
	CacheReadTokens  int64
	CacheWriteTokens int64
}

// Add accumulates u2 into u.
func (u *Usage) Add(u2 Usage) {
	u.InputTokens += u2.InputTokens
	u.OutputTokens += u2.OutputTokens
	u.CacheReadTokens += u2.CacheReadTokens
	u.CacheWriteTokens += u2.CacheWriteTokens
}

// Response is the assistant's turn.
type Response struct {
	Text       string
	ToolCalls  []ToolCall
	StopReason string
	Usage      Usage
}

// Provider is one model API.
type Provider interface {
	// Name is "anthropic" or "openai".
	Name() string
	Complete(ctx context.Context, req Request) (Response, error)
}

// Config builds a provider.
type Config struct {
	Provider string // anthropic | openai
	// BaseURL of the API. Anthropic: without /v1 (a trailing /v1 is
	// dropped); OpenAI-compatible: with it, e.g. http://127.0.0.1:11434/v1.
	// Empty = the vendor's public endpoint.
	BaseURL string
	APIKey  string
	// HTTPClient is optional (tests, proxies).
	HTTPClient *http.Client
	// Timeout per request; 0 = none beyond the context.
	Timeout time.Duration
}

// Provider names.
const (
	Anthropic = "anthropic"
	OpenAI    = "openai"
)

// DefaultBaseURL is the public endpoint of a provider.
func DefaultBaseURL(provider string) string {
	switch provider {
	case Anthropic:
		return "https://api.anthropic.com"
	case OpenAI:
		return "https://api.openai.com/v1"
	}
	return ""
}

// New builds the provider named by cfg.Provider.
func New(cfg Config) (Provider, error) {
	switch strings.ToLower(strings.TrimSpace(cfg.Provider)) {
	case Anthropic, "claude":
		return newAnthropic(cfg), nil
	case OpenAI, "openai-compatible", "chat", "ollama", "vllm":
		return newOpenAI(cfg), nil
	case "":
		return nil, errors.New("llm: no provider given (anthropic | openai)")
	}
	return nil, fmt.Errorf("llm: unknown provider %q (anthropic | openai)", cfg.Provider)
}

// placeholderKey is sent to local servers that need no key: some proxies in
// front of them refuse a request without one.
const placeholderKey = "ralph-no-key"

// IsLoopback reports whether a base URL points at this machine (Ollama,
// vLLM, a test server), where an API key is usually not needed.
func IsLoopback(baseURL string) bool {
	u, err := url.Parse(baseURL)
	if err != nil || u.Host == "" {
		return false
	}
	host := u.Hostname()
	if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// endpoint is one API's URL, headers and HTTP client.
type endpoint struct {
	provider string
	url      string
	header   map[string]string
	client   *http.Client // nil = http.DefaultClient
	timeout  time.Duration
}

// maxResponseBytes bounds a response body read into memory.
const maxResponseBytes = 64 << 20

// post sends body as JSON and decodes a 2xx answer into out; any other
// status comes back as *RateLimitError or *APIError.
func (e endpoint) post(ctx context.Context, body, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("%s API: encoding the request: %w", e.provider, err)
	}
	if e.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, e.timeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("%s API: %w", e.provider, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	for k, v := range e.header {
		req.Header.Set(k, v)
	}
	client := e.client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return fmt.Errorf("%s API: reading the response: %w", e.provider, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return httpError(e.provider, resp.StatusCode, resp.Header, string(raw))
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return &APIError{Provider: e.provider, Status: resp.StatusCode, Message: "unreadable response: " + err.Error()}
	}
	return nil
}

// RateLimitError is HTTP 429 (or a provider's equivalent).
type RateLimitError struct {
	RetryAfter time.Duration // 0 = the server did not say
	Message    string
	Status     int
}

func (e *RateLimitError) Error() string {
	msg := "rate limited"
	if e.Message != "" {
		msg += ": " + e.Message
	}
	if e.RetryAfter > 0 {
		msg += fmt.Sprintf(" (retry after %s)", e.RetryAfter)
	}
	return msg
}

// APIError is any other HTTP failure from the API.
type APIError struct {
	Provider string
	Status   int
	Type     string // provider error type when given (e.g. overloaded_error)
	Message  string
}

func (e *APIError) Error() string {
	s := fmt.Sprintf("%s API error: HTTP %d", e.Provider, e.Status)
	if t := http.StatusText(e.Status); t != "" {
		s += " " + t
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// Retryable reports whether trying again later may help (5xx, 408, 409,
// Anthropic's 529 overloaded).
func (e *APIError) Retryable() bool {
	return e.Status >= 500 || e.Status == http.StatusRequestTimeout || e.Status == http.StatusConflict
}

// httpError turns a status, headers and raw body into *RateLimitError or
// *APIError.
func httpError(provider string, status int, h http.Header, raw string) error {
	typ, msg := errorBody(raw)
	if msg == "" {
		msg = strings.TrimSpace(raw)
		if len(msg) > 500 {
			msg = msg[:500] + "…"
		}
	}
	if status == http.StatusTooManyRequests {
		return &RateLimitError{RetryAfter: retryAfter(h, time.Now()), Message: msg, Status: status}
	}
	return &APIError{Provider: provider, Status: status, Type: typ, Message: msg}
}

// errorBody extracts type and message from the usual error envelopes:
// {"error":{"type":..,"message":..}}, {"error":"text"}, {"message":..}.
func errorBody(raw string) (typ, msg string) {
	var env struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
		Type    string          `json:"type"`
	}
	if json.Unmarshal([]byte(raw), &env) != nil {
		return "", ""
	}
	if len(env.Error) > 0 {
		var inner struct {
			Type    string `json:"type"`
			Code    any    `json:"code"`
			Message string `json:"message"`
		}
		if json.Unmarshal(env.Error, &inner) == nil {
			t := inner.Type
			if t == "" {
				if c, ok := inner.Code.(string); ok {
					t = c
				}
			}
			return t, inner.Message
		}
		var s string
		if json.Unmarshal(env.Error, &s) == nil {
			return "", s
		}
	}
	if env.Type == "error" {
		env.Type = ""
	}
	return env.Type, env.Message
}

// retryAfter reads retry-after-ms, then retry-after (seconds or an HTTP
// date). 0 when absent or unreadable.
func retryAfter(h http.Header, now time.Time) time.Duration {
	if h == nil {
		return 0
	}
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s <= 0 {
			return 0
		}
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}

// inputOrEmpty gives a tool call's input as a JSON object text.
func inputOrEmpty(in json.RawMessage) json.RawMessage {
	t := strings.TrimSpace(string(in))
	if t == "" || t == "null" {
		return json.RawMessage(`{}`)
	}
	return json.RawMessage(t)
}
