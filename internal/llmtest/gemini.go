package llmtest

import (
	"encoding/json"
	"net/http"
	"strings"
)

func geminiStatus(code int) string {
	switch code {
	case 400:
		return "INVALID_ARGUMENT"
	case 401:
		return "UNAUTHENTICATED"
	case 403:
		return "PERMISSION_DENIED"
	case 404:
		return "NOT_FOUND"
	case 405:
		return "UNIMPLEMENTED"
	case 409:
		return "ABORTED"
	case 429:
		return "RESOURCE_EXHAUSTED"
	case 499:
		return "CANCELLED"
	case 501:
		return "UNIMPLEMENTED"
	case 503:
		return "UNAVAILABLE"
	case 504:
		return "DEADLINE_EXCEEDED"
	}
	if code >= 500 {
		return "INTERNAL"
	}
	return "FAILED_PRECONDITION"
}

func geminiError(w http.ResponseWriter, status int, msg string, retryAfter int) {
	setRetryAfter(w, status, retryAfter)
	e := map[string]any{"code": status, "message": msg, "status": geminiStatus(status)}
	if status == http.StatusTooManyRequests && retryAfter > 0 {
		e["details"] = []any{map[string]any{
			"@type":      "type.googleapis.com/google.rpc.RetryInfo",
			"retryDelay": itoa(retryAfter) + "s",
		}}
	}
	writeJSON(w, status, map[string]any{"error": e})
}

func geminiModelEntry(id string) map[string]any {
	return map[string]any{
		"name":                       "models/" + id,
		"version":                    "001",
		"displayName":                id,
		"inputTokenLimit":            1048576,
		"outputTokenLimit":           65536,
		"supportedGenerationMethods": []string{"generateContent", "streamGenerateContent", "countTokens"},
	}
}

func geminiModels(c *call, id string) {
	if id != "" {
		writeJSON(c.w, http.StatusOK, geminiModelEntry(strings.TrimPrefix(id, "models/")))
		return
	}
	var list []any
	for _, m := range []string{"gemini-2.5-pro", "gemini-2.5-flash", "llmtest"} {
		list = append(list, geminiModelEntry(m))
	}
	writeJSON(c.w, http.StatusOK, map[string]any{"models": list})
}

type geminiTool struct {
	FunctionDeclarations  []json.RawMessage `json:"functionDeclarations"`
	FunctionDeclarations2 []json.RawMessage `json:"function_declarations"`
}

type geminiGenConfig struct {
	ResponseMimeType    string          `json:"responseMimeType"`
	ResponseSchema      json.RawMessage `json:"responseSchema"`
	ResponseJSONSchema  json.RawMessage `json:"responseJsonSchema"`
	ResponseMimeType2   string          `json:"response_mime_type"`
	ResponseSchema2     json.RawMessage `json:"response_schema"`
	ResponseJSONSchema2 json.RawMessage `json:"response_json_schema"`
}

type geminiRequest struct {
	Contents []struct {
		Role string `json:"role"`
	} `json:"contents"`
	Tools             []geminiTool     `json:"tools"`
	GenerationConfig  *geminiGenConfig `json:"generationConfig"`
	GenerationConfig2 *geminiGenConfig `json:"generation_config"`
}

func (s *Server) handleGemini(c *call, model, action string) {
	c.rec.API = apiGemini
	c.rec.Model = model
	switch action {
	case "generateContent", "streamGenerateContent", "countTokens":
	default:
		geminiError(c.w, http.StatusNotFound, "llmtest: unsupported method "+action, 0)
		return
	}
	var req geminiRequest
	if err := json.Unmarshal(c.body, &req); err != nil {
		geminiError(c.w, http.StatusBadRequest, badJSON(err), 0)
		return
	}
	if action == "countTokens" {
		c.rec.API = apiCountTokens
		writeJSON(c.w, http.StatusOK, map[string]any{"totalTokens": tokens(len(c.body))})
		return
	}
	stream := action == "streamGenerateContent"
	c.rec.Stream = stream
	nTools := 0
	for _, t := range req.Tools {
		nTools += len(t.FunctionDeclarations) + len(t.FunctionDeclarations2)
	}
	c.rec.Tools = nTools
	roles := make([]bool, len(req.Contents))
	for i, ct := range req.Contents {
		roles[i] = ct.Role == "model"
	}
	var side string
	if nTools == 0 {
		gc := req.GenerationConfig
		if gc == nil {
			gc = req.GenerationConfig2
		}
		wantJSON := false
		var schema json.RawMessage
		if gc != nil {
			mime := gc.ResponseMimeType + gc.ResponseMimeType2
			for _, sc := range []json.RawMessage{gc.ResponseJSONSchema, gc.ResponseSchema, gc.ResponseJSONSchema2, gc.ResponseSchema2} {
				if len(sc) > 0 && string(sc) != "null" {
					schema = sc
					break
				}
			}
			wantJSON = strings.Contains(mime, "json") || schema != nil
		}
		side = s.sideReply(wantJSON, schema)
	}
	t := s.decide(c.rec, countTurns(roles), nTools > 0, side)
	if t.fault != nil {
		geminiError(c.w, t.fault.Status, faultMessage(t.fault), t.fault.RetryAfter)
		return
	}
	inTok, outTok := tokens(len(c.body)), outputTokens(t)
	respID := randID("", 22)
	type part = map[string]any
	response := func(parts []part, final bool) map[string]any {
		cand := map[string]any{"content": map[string]any{"parts": parts, "role": "model"}, "index": 0}
		usage := map[string]any{"promptTokenCount": inTok, "totalTokenCount": inTok}
		if final {
			cand["finishReason"] = "STOP"
			usage["candidatesTokenCount"] = outTok
			usage["totalTokenCount"] = inTok + outTok
		}
		return map[string]any{"candidates": []any{cand}, "usageMetadata": usage, "modelVersion": model, "responseId": respID}
	}
	// Each streamed chunk carries one part; the last one also the finish reason.
	var parts []part
	if stream {
		for _, piece := range chunks(t.text, textChunk) {
			parts = append(parts, part{"text": piece})
		}
	} else if t.text != "" {
		parts = append(parts, part{"text": t.text})
	}
	for _, tc := range t.calls {
		parts = append(parts, part{"functionCall": map[string]any{"name": tc.Name, "args": inputObject(tc.Input)}})
	}
	if len(parts) == 0 {
		parts = append(parts, part{"text": t.text})
	}
	if !stream {
		writeJSON(c.w, http.StatusOK, response(parts, true))
		return
	}
	if c.r.URL.Query().Get("alt") != "sse" {
		// Without alt=sse the API streams one JSON array.
		var list []any
		for i, p := range parts {
			list = append(list, response([]part{p}, i == len(parts)-1))
		}
		writeJSON(c.w, http.StatusOK, list)
		return
	}
	e := c.startSSE()
	for i, p := range parts {
		if i == len(parts)-1 {
			e.end()
		}
		e.data(response([]part{p}, i == len(parts)-1), "\r\n\r\n")
	}
}
