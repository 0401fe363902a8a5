package llmtest

import (
	"encoding/json"
	"strings"
)

// sideReply is the answer to a request without tools. When the request asks
// for JSON output it is a JSON value: the side answer itself if it is valid
// JSON, else a value synthesized from schema (first enum values, "ok" for
// strings, zeros), else {}.
func (s *Server) sideReply(wantJSON bool, schema json.RawMessage) string {
	ans := s.script.sideAnswer()
	if !wantJSON || json.Valid([]byte(ans)) {
		return ans
	}
	var sch any
	if len(schema) > 0 && json.Unmarshal(schema, &sch) == nil {
		if v := synth(sch, 0); v != nil {
			if data, err := json.Marshal(v); err == nil {
				return string(data)
			}
		}
	}
	return "{}"
}

// synth makes a value matching a JSON schema or Gemini Schema.
func synth(schema any, depth int) any {
	m, ok := schema.(map[string]any)
	if !ok || depth > 16 {
		return nil
	}
	if c, ok := m["const"]; ok {
		return c
	}
	if e, ok := m["enum"].([]any); ok && len(e) > 0 {
		return e[0]
	}
	for _, k := range []string{"anyOf", "oneOf", "allOf", "any_of"} {
		if alts, ok := m[k].([]any); ok && len(alts) > 0 {
			return synth(alts[0], depth+1)
		}
	}
	typ := ""
	switch t := m["type"].(type) {
	case string:
		typ = strings.ToLower(t)
	case []any:
		for _, x := range t {
			if xs, ok := x.(string); ok && xs != "null" {
				typ = strings.ToLower(xs)
				break
			}
		}
	}
	if typ == "" {
		if _, ok := m["properties"]; ok {
			typ = "object"
		}
	}
	switch typ {
	case "object":
		out := map[string]any{}
		if props, ok := m["properties"].(map[string]any); ok {
			for k, v := range props {
				if x := synth(v, depth+1); x != nil {
					out[k] = x
				} else {
					out[k] = "ok"
				}
			}
		}
		return out
	case "array":
		return []any{}
	case "string":
		return "ok"
	case "number", "integer":
		return 0
	case "boolean":
		return false
	}
	return nil
}
