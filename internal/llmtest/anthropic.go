package llmtest

import (
	"encoding/json"
	"net/http"
	"strconv"
)

type anthropicRequest struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	Messages []struct {
		Role string `json:"role"`
	} `json:"messages"`
	Tools        []json.RawMessage `json:"tools"`
	OutputFormat *struct {
		Type   string          `json:"type"`
		Schema json.RawMessage `json:"schema"`
	} `json:"output_format"`
}

func anthropicErrorType(status int) string {
	switch status {
	case 400:
		return "invalid_request_error"
	case 401:
		return "authentication_error"
	case 402:
		return "billing_error"
	case 403:
		return "permission_error"
	case 404:
		return "not_found_error"
	case 405:
		return "invalid_request_error"
	case 413:
		return "request_too_large"
	case 429:
		return "rate_limit_error"
	case 504:
		return "timeout_error"
	case 529, 503:
		return "overloaded_error"
	}
	if status >= 500 {
		return "api_error"
	}
	return "invalid_request_error"
}

func anthropicError(w http.ResponseWriter, status int, msg string, retryAfter int) {
	setRetryAfter(w, status, retryAfter)
	w.Header().Set("Request-Id", randID("req_011", 21))
	w.Header().Set("X-Should-Retry", strconv.FormatBool(status == 429 || status >= 500))
	writeJSON(w, status, map[string]any{
		"type":       "error",
		"error":      map[string]any{"type": anthropicErrorType(status), "message": msg},
		"request_id": randID("req_011", 21),
	})
}

func (s *Server) handleAnthropicCount(c *call) {
	var req anthropicRequest
	if err := json.Unmarshal(c.body, &req); err != nil {
		anthropicError(c.w, http.StatusBadRequest, badJSON(err), 0)
		return
	}
	c.rec.Model = req.Model
	writeJSON(c.w, http.StatusOK, map[string]any{"input_tokens": tokens(len(c.body))})
}

func (s *Server) handleAnthropic(c *call) {
	var req anthropicRequest
	if err := json.Unmarshal(c.body, &req); err != nil {
		anthropicError(c.w, http.StatusBadRequest, badJSON(err), 0)
		return
	}
	c.rec.Model, c.rec.Stream, c.rec.Tools = req.Model, req.Stream, len(req.Tools)
	roles := make([]bool, len(req.Messages))
	for i, m := range req.Messages {
		roles[i] = m.Role == "assistant"
	}
	var side string
	if len(req.Tools) == 0 {
		wantJSON := req.OutputFormat != nil && req.OutputFormat.Type == "json_schema"
		var schema json.RawMessage
		if wantJSON {
			schema = req.OutputFormat.Schema
		}
		side = s.sideReply(wantJSON, schema)
	}
	t := s.decide(c.rec, countTurns(roles), len(req.Tools) > 0, side)
	if t.fault != nil {
		anthropicError(c.w, t.fault.Status, faultMessage(t.fault), t.fault.RetryAfter)
		return
	}
	model := req.Model
	if model == "" {
		model = "claude-llmtest"
	}
	msgID := randID("msg_01", 22)
	inTok, outTok := tokens(len(c.body)), outputTokens(t)
	stop := "end_turn"
	if len(t.calls) > 0 {
		stop = "tool_use"
	}
	type block = map[string]any
	var content []block
	if t.text != "" || len(t.calls) == 0 {
		content = append(content, block{"type": "text", "text": t.text})
	}
	for _, tc := range t.calls {
		content = append(content, block{"type": "tool_use", "id": randID("toolu_01", 22), "name": tc.Name, "input": inputObject(tc.Input)})
	}
	c.w.Header().Set("Request-Id", randID("req_011", 21))
	c.w.Header().Set("Anthropic-Organization-Id", "00000000-0000-4000-8000-000000000000")

	if !req.Stream {
		writeJSON(c.w, http.StatusOK, map[string]any{
			"id":            msgID,
			"type":          "message",
			"role":          "assistant",
			"model":         model,
			"content":       content,
			"stop_reason":   stop,
			"stop_sequence": nil,
			"usage": map[string]any{
				"input_tokens":                inTok,
				"cache_creation_input_tokens": 0,
				"cache_read_input_tokens":     0,
				"output_tokens":               outTok,
				"service_tier":                "standard",
			},
		})
		return
	}

	e := c.startSSE()
	e.event("message_start", map[string]any{
		"type": "message_start",
		"message": map[string]any{
			"id":            msgID,
			"type":          "message",
			"role":          "assistant",
			"model":         model,
			"content":       []any{},
			"stop_reason":   nil,
			"stop_sequence": nil,
			"usage": map[string]any{
				"input_tokens":                inTok,
				"cache_creation_input_tokens": 0,
				"cache_read_input_tokens":     0,
				"output_tokens":               1,
				"service_tier":                "standard",
			},
		},
	})
	e.event("ping", map[string]any{"type": "ping"})
	for i, b := range content {
		if b["type"] == "text" {
			e.event("content_block_start", map[string]any{
				"type": "content_block_start", "index": i,
				"content_block": block{"type": "text", "text": ""},
			})
			for _, piece := range chunks(t.text, textChunk) {
				e.event("content_block_delta", map[string]any{
					"type": "content_block_delta", "index": i,
					"delta": block{"type": "text_delta", "text": piece},
				})
			}
		} else {
			e.event("content_block_start", map[string]any{
				"type": "content_block_start", "index": i,
				"content_block": block{"type": "tool_use", "id": b["id"], "name": b["name"], "input": map[string]any{}},
			})
			e.event("content_block_delta", map[string]any{
				"type": "content_block_delta", "index": i,
				"delta": block{"type": "input_json_delta", "partial_json": ""},
			})
			for _, piece := range chunks(string(b["input"].(json.RawMessage)), argsChunk) {
				e.event("content_block_delta", map[string]any{
					"type": "content_block_delta", "index": i,
					"delta": block{"type": "input_json_delta", "partial_json": piece},
				})
			}
		}
		e.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	e.end()
	e.event("message_delta", map[string]any{
		"type":  "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{
			"input_tokens":                inTok,
			"cache_creation_input_tokens": 0,
			"cache_read_input_tokens":     0,
			"output_tokens":               outTok,
		},
	})
	e.event("message_stop", map[string]any{"type": "message_stop"})
}
