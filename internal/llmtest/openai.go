package llmtest

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

func openaiError(w http.ResponseWriter, status int, msg string, retryAfter int) {
	setRetryAfter(w, status, retryAfter)
	typ, code := "invalid_request_error", any(nil)
	switch {
	case status == 401:
		code = "invalid_api_key"
	case status == 404:
		code = "not_found"
	case status == 429:
		typ, code = "rate_limit_exceeded", "rate_limit_exceeded"
	case status >= 500:
		typ = "server_error"
	}
	w.Header().Set("X-Request-Id", hexID("req_", 32))
	writeJSON(w, status, map[string]any{
		"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": code},
	})
}

// ---- model listing ----

var modelIDs = []string{"llmtest", "gpt-5", "claude-sonnet-4-5", "gemini-2.5-pro"}

// modelEntry is readable both as an OpenAI and as an Anthropic model.
func modelEntry(id string) map[string]any {
	return map[string]any{
		"id":           id,
		"object":       "model",
		"created":      1735689600,
		"owned_by":     "llmtest",
		"type":         "model",
		"display_name": id,
		"created_at":   "2025-01-01T00:00:00Z",
	}
}

func listModels(c *call, id string) {
	if id != "" {
		writeJSON(c.w, http.StatusOK, modelEntry(id))
		return
	}
	var data []any
	for _, m := range modelIDs {
		data = append(data, modelEntry(m))
	}
	writeJSON(c.w, http.StatusOK, map[string]any{
		"object":   "list",
		"data":     data,
		"has_more": false,
		"first_id": modelIDs[0],
		"last_id":  modelIDs[len(modelIDs)-1],
	})
}

// ---- Responses API ----

type responsesRequest struct {
	Model        string          `json:"model"`
	Stream       bool            `json:"stream"`
	Input        json.RawMessage `json:"input"`
	Instructions any             `json:"instructions"`
	Tools        []struct {
		Type string `json:"type"`
		Name string `json:"name"`
	} `json:"tools"`
	Text *struct {
		Format *struct {
			Type   string          `json:"type"`
			Schema json.RawMessage `json:"schema"`
		} `json:"format"`
	} `json:"text"`
	ParallelToolCalls *bool `json:"parallel_tool_calls"`
}

type responsesItem struct {
	Type   string `json:"type"`
	Role   string `json:"role"`
	CallID string `json:"call_id"`
}

// assistant-side output item types of the Responses API.
var responsesOutputTypes = map[string]bool{
	"function_call": true, "custom_tool_call": true, "local_shell_call": true,
	"reasoning": true, "web_search_call": true, "file_search_call": true,
	"computer_call": true, "image_generation_call": true,
	"code_interpreter_call": true, "mcp_call": true, "mcp_list_tools": true,
	"mcp_approval_request": true, "tool_search_call": true, "shell_call": true,
	"apply_patch_call": true,
}

// callTag extracts the per-response tag from call ids this server made
// ("call_<tag>_<n>"); "" for other ids.
func callTag(id string) string {
	rest, ok := strings.CutPrefix(id, "call_")
	if !ok {
		return ""
	}
	tag, _, ok := strings.Cut(rest, "_")
	if !ok || len(tag) != 16 {
		return ""
	}
	return tag
}

// responsesTurns counts model turns in a Responses input. A turn is a
// contiguous run of assistant output items; in addition, output items whose
// call_id carries the same response tag as the current turn belong to it even
// when tool outputs were interleaved (Codex records call, output, call,
// output for one response with several calls).
func responsesTurns(items []responsesItem) int {
	n, contiguous, tag := 0, false, ""
	for _, it := range items {
		typ := it.Type
		if typ == "" && it.Role != "" {
			typ = "message"
		}
		out := responsesOutputTypes[typ] || (typ == "message" && it.Role == "assistant")
		if !out {
			contiguous = false
			if typ == "message" {
				tag = ""
			}
			continue
		}
		t := callTag(it.CallID)
		switch {
		case contiguous:
			if tag == "" {
				tag = t
			}
		case t != "" && t == tag:
			// same response, after interleaved tool outputs
		default:
			n++
			tag = t
		}
		contiguous = true
	}
	return n
}

func (s *Server) handleResponses(c *call) {
	var req responsesRequest
	if err := json.Unmarshal(c.body, &req); err != nil {
		openaiError(c.w, http.StatusBadRequest, badJSON(err), 0)
		return
	}
	var items []responsesItem
	if len(req.Input) > 0 && req.Input[0] == '[' {
		if err := json.Unmarshal(req.Input, &items); err != nil {
			openaiError(c.w, http.StatusBadRequest, badJSON(err), 0)
			return
		}
	}
	c.rec.Model, c.rec.Stream, c.rec.Tools = req.Model, req.Stream, len(req.Tools)
	custom := map[string]bool{}
	for _, t := range req.Tools {
		if t.Type == "custom" {
			custom[t.Name] = true
		}
	}
	var side string
	if len(req.Tools) == 0 {
		wantJSON := false
		var schema json.RawMessage
		if req.Text != nil && req.Text.Format != nil {
			wantJSON = req.Text.Format.Type == "json_schema" || req.Text.Format.Type == "json_object"
			schema = req.Text.Format.Schema
		}
		side = s.sideReply(wantJSON, schema)
	}
	t := s.decide(c.rec, responsesTurns(items), len(req.Tools) > 0, side)
	if t.fault != nil {
		openaiError(c.w, t.fault.Status, faultMessage(t.fault), t.fault.RetryAfter)
		return
	}
	model := req.Model
	if model == "" {
		model = "llmtest"
	}
	inTok, outTok := tokens(len(c.body)), outputTokens(t)
	respID := hexID("resp_", 48)
	created := time.Now().Unix()
	tag := randID("", 16)

	type item = map[string]any
	var output []item
	if t.text != "" || len(t.calls) == 0 {
		output = append(output, item{
			"id": hexID("msg_", 48), "type": "message", "status": "completed", "role": "assistant",
			"content": []any{map[string]any{"type": "output_text", "text": t.text, "annotations": []any{}, "logprobs": []any{}}},
		})
	}
	for i, tc := range t.calls {
		callID := "call_" + tag + "_" + itoa(i)
		if custom[tc.Name] {
			output = append(output, item{
				"id": hexID("ctc_", 48), "type": "custom_tool_call", "status": "completed",
				"call_id": callID, "name": tc.Name, "input": customInput(tc.Input),
			})
			continue
		}
		fc := item{
			"id": hexID("fc_", 48), "type": "function_call", "status": "completed",
			"call_id": callID, "name": tc.Name, "arguments": string(inputObject(tc.Input)),
		}
		if tc.Namespace != "" {
			fc["namespace"] = tc.Namespace
		}
		output = append(output, fc)
	}
	tools := any([]any{})
	if len(req.Tools) > 0 {
		var raw struct {
			Tools json.RawMessage `json:"tools"`
		}
		if json.Unmarshal(c.body, &raw) == nil {
			tools = raw.Tools
		}
	}
	parallel := true
	if req.ParallelToolCalls != nil {
		parallel = *req.ParallelToolCalls
	}
	response := func(status string, out []item, usage any) map[string]any {
		if out == nil {
			out = []item{}
		}
		return map[string]any{
			"id": respID, "object": "response", "created_at": created, "status": status,
			"background": false, "error": nil, "incomplete_details": nil,
			"instructions": req.Instructions, "max_output_tokens": nil, "model": model,
			"output": out, "parallel_tool_calls": parallel, "previous_response_id": nil,
			"reasoning": map[string]any{"effort": nil, "summary": nil}, "service_tier": "default",
			"store": false, "temperature": 1.0, "text": map[string]any{"format": map[string]any{"type": "text"}},
			"tool_choice": "auto", "tools": tools, "top_p": 1.0, "truncation": "disabled",
			"usage": usage, "user": nil, "metadata": map[string]any{},
		}
	}
	usage := map[string]any{
		"input_tokens":          inTok,
		"input_tokens_details":  map[string]any{"cached_tokens": 0},
		"output_tokens":         outTok,
		"output_tokens_details": map[string]any{"reasoning_tokens": 0},
		"total_tokens":          inTok + outTok,
	}
	c.w.Header().Set("X-Request-Id", hexID("req_", 32))
	if !req.Stream {
		writeJSON(c.w, http.StatusOK, response("completed", output, usage))
		return
	}

	e := c.startSSE()
	ev := func(typ string, fields map[string]any) {
		fields["type"] = typ
		fields["sequence_number"] = e.seq
		e.seq++
		e.event(typ, fields)
	}
	ev("response.created", map[string]any{"response": response("in_progress", nil, nil)})
	ev("response.in_progress", map[string]any{"response": response("in_progress", nil, nil)})
	for i, it := range output {
		id := it["id"]
		switch it["type"] {
		case "message":
			ev("response.output_item.added", map[string]any{"output_index": i, "item": item{
				"id": id, "type": "message", "status": "in_progress", "role": "assistant", "content": []any{},
			}})
			ev("response.content_part.added", map[string]any{"item_id": id, "output_index": i, "content_index": 0,
				"part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}, "logprobs": []any{}}})
			for _, piece := range chunks(t.text, textChunk) {
				ev("response.output_text.delta", map[string]any{"item_id": id, "output_index": i, "content_index": 0, "delta": piece, "logprobs": []any{}})
			}
			ev("response.output_text.done", map[string]any{"item_id": id, "output_index": i, "content_index": 0, "text": t.text, "logprobs": []any{}})
			ev("response.content_part.done", map[string]any{"item_id": id, "output_index": i, "content_index": 0,
				"part": map[string]any{"type": "output_text", "text": t.text, "annotations": []any{}, "logprobs": []any{}}})
		case "function_call":
			args := it["arguments"].(string)
			added := item{"id": id, "type": "function_call", "status": "in_progress", "call_id": it["call_id"], "name": it["name"], "arguments": ""}
			if ns, ok := it["namespace"]; ok {
				added["namespace"] = ns
			}
			ev("response.output_item.added", map[string]any{"output_index": i, "item": added})
			for _, piece := range chunks(args, argsChunk) {
				ev("response.function_call_arguments.delta", map[string]any{"item_id": id, "output_index": i, "delta": piece})
			}
			ev("response.function_call_arguments.done", map[string]any{"item_id": id, "output_index": i, "name": it["name"], "arguments": args})
		case "custom_tool_call":
			in := it["input"].(string)
			ev("response.output_item.added", map[string]any{"output_index": i, "item": item{
				"id": id, "type": "custom_tool_call", "status": "in_progress", "call_id": it["call_id"], "name": it["name"], "input": "",
			}})
			for _, piece := range chunks(in, argsChunk) {
				ev("response.custom_tool_call_input.delta", map[string]any{"item_id": id, "output_index": i, "delta": piece})
			}
			ev("response.custom_tool_call_input.done", map[string]any{"item_id": id, "output_index": i, "input": in})
		}
		ev("response.output_item.done", map[string]any{"output_index": i, "item": it})
	}
	e.end()
	ev("response.completed", map[string]any{"response": response("completed", output, usage)})
}

// customInput is the free-form input of a custom tool call: a JSON string
// input verbatim, the "input" string of an object, else the JSON text.
func customInput(in json.RawMessage) string {
	var s string
	if json.Unmarshal(in, &s) == nil {
		return s
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(in, &obj) == nil && len(obj) == 1 {
		if v, ok := obj["input"]; ok && json.Unmarshal(v, &s) == nil {
			return s
		}
	}
	return string(in)
}

func itoa(i int) string {
	data, _ := json.Marshal(i)
	return string(data)
}

// ---- Chat Completions ----

type chatRequest struct {
	Model         string `json:"model"`
	Stream        bool   `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	Messages []struct {
		Role string `json:"role"`
	} `json:"messages"`
	Tools          []json.RawMessage `json:"tools"`
	Functions      []json.RawMessage `json:"functions"`
	ResponseFormat *struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Schema json.RawMessage `json:"schema"`
		} `json:"json_schema"`
	} `json:"response_format"`
}

func (s *Server) handleChat(c *call) {
	var req chatRequest
	if err := json.Unmarshal(c.body, &req); err != nil {
		openaiError(c.w, http.StatusBadRequest, badJSON(err), 0)
		return
	}
	nTools := len(req.Tools) + len(req.Functions)
	c.rec.Model, c.rec.Stream, c.rec.Tools = req.Model, req.Stream, nTools
	roles := make([]bool, len(req.Messages))
	for i, m := range req.Messages {
		roles[i] = m.Role == "assistant"
	}
	var side string
	if nTools == 0 {
		wantJSON := false
		var schema json.RawMessage
		if rf := req.ResponseFormat; rf != nil {
			wantJSON = rf.Type == "json_schema" || rf.Type == "json_object"
			if rf.JSONSchema != nil {
				schema = rf.JSONSchema.Schema
			}
		}
		side = s.sideReply(wantJSON, schema)
	}
	t := s.decide(c.rec, countTurns(roles), nTools > 0, side)
	if t.fault != nil {
		openaiError(c.w, t.fault.Status, faultMessage(t.fault), t.fault.RetryAfter)
		return
	}
	model := req.Model
	if model == "" {
		model = "llmtest"
	}
	inTok, outTok := tokens(len(c.body)), outputTokens(t)
	id := randID("chatcmpl-", 29)
	created := time.Now().Unix()
	finish := "stop"
	if len(t.calls) > 0 {
		finish = "tool_calls"
	}
	type fn = map[string]any
	var calls []fn
	for _, tc := range t.calls {
		calls = append(calls, fn{"id": randID("call_", 24), "type": "function",
			"function": fn{"name": tc.Name, "arguments": string(inputObject(tc.Input))}})
	}
	usage := map[string]any{
		"prompt_tokens": inTok, "completion_tokens": outTok, "total_tokens": inTok + outTok,
		"prompt_tokens_details":     map[string]any{"cached_tokens": 0},
		"completion_tokens_details": map[string]any{"reasoning_tokens": 0},
	}
	c.w.Header().Set("X-Request-Id", hexID("req_", 32))
	if !req.Stream {
		msg := map[string]any{"role": "assistant", "content": nil, "refusal": nil}
		if t.text != "" || len(calls) == 0 {
			msg["content"] = t.text
		}
		if len(calls) > 0 {
			msg["tool_calls"] = calls
		}
		writeJSON(c.w, http.StatusOK, map[string]any{
			"id": id, "object": "chat.completion", "created": created, "model": model,
			"system_fingerprint": "fp_llmtest",
			"choices":            []any{map[string]any{"index": 0, "message": msg, "logprobs": nil, "finish_reason": finish}},
			"usage":              usage,
		})
		return
	}

	includeUsage := req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	e := c.startSSE()
	chunk := func(delta map[string]any, finishReason any) {
		ch := map[string]any{
			"id": id, "object": "chat.completion.chunk", "created": created, "model": model,
			"system_fingerprint": "fp_llmtest",
			"choices":            []any{map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finishReason}},
		}
		if includeUsage {
			ch["usage"] = nil
		}
		e.data(ch, "\n\n")
	}
	if t.text != "" || len(calls) == 0 {
		chunk(map[string]any{"role": "assistant", "content": "", "refusal": nil}, nil)
		for _, piece := range chunks(t.text, textChunk) {
			chunk(map[string]any{"content": piece}, nil)
		}
	} else {
		chunk(map[string]any{"role": "assistant", "content": nil, "refusal": nil}, nil)
	}
	for i, tc := range calls {
		f := tc["function"].(fn)
		chunk(map[string]any{"tool_calls": []any{map[string]any{
			"index": i, "id": tc["id"], "type": "function",
			"function": fn{"name": f["name"], "arguments": ""},
		}}}, nil)
		for _, piece := range chunks(f["arguments"].(string), argsChunk) {
			chunk(map[string]any{"tool_calls": []any{map[string]any{
				"index": i, "function": fn{"arguments": piece},
			}}}, nil)
		}
	}
	e.end()
	chunk(map[string]any{}, finish)
	if includeUsage {
		e.data(map[string]any{
			"id": id, "object": "chat.completion.chunk", "created": created, "model": model,
			"system_fingerprint": "fp_llmtest", "choices": []any{}, "usage": usage,
		}, "\n\n")
	}
	e.write("data: [DONE]\n\n")
}
