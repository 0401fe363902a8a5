// Package llmtest is a scripted LLM server for end-to-end tests. It speaks the
// Anthropic Messages, OpenAI Responses, OpenAI Chat Completions and Gemini
// generateContent APIs (streaming and not) and picks its reply statelessly from
// the number of assistant turns already present in the request's conversation.
//
// Endpoints (the /v1 prefix is optional for the OpenAI and Anthropic paths):
//
//	POST /v1/messages[?beta=true]           Anthropic Messages (stream or not)
//	POST /v1/messages/count_tokens          Anthropic token count
//	POST /v1/responses                      OpenAI Responses (stream or not)
//	POST /v1/chat/completions               OpenAI Chat Completions (stream or not)
//	GET  /v1/models[/ID]                    model list (OpenAI and Anthropic shape)
//	POST /v1beta/models/M:generateContent   Gemini
//	POST /v1beta/models/M:streamGenerateContent[?alt=sse]
//	POST /v1beta/models/M:countTokens
//	GET  /healthz
//
// Base URLs for clients: Anthropic SDK / ANTHROPIC_BASE_URL = URL();
// OpenAI clients = URL()+"/v1"; GOOGLE_GEMINI_BASE_URL = URL(). Any API key
// is accepted.
//
// Step choice: step index = number of assistant turns in the request
// (Anthropic/Chat: contiguous runs of "assistant" messages; Gemini: runs of
// "model" contents; Responses: runs of assistant output items, where function
// calls whose call_id this server issued in one response count once even when
// tool outputs are interleaved). Past the last step the server repeats the last
// step's text without tool calls. Requests declaring no tools are side
// requests: they get Script.SideAnswer and consume nothing.
package llmtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/goccy/go-yaml"
)

// ToolCall is one tool invocation the scripted model makes.
type ToolCall struct {
	Name string `json:"name"`
	// Namespace is the Responses API's tool namespace the tool is in (Codex
	// puts an MCP server's tools in "mcp__<server>"); other APIs ignore it.
	Namespace string `json:"namespace,omitempty"`
	// Input is a JSON object with the tool's arguments. Empty means {}.
	Input json.RawMessage `json:"input,omitempty"`
}

// Step is one scripted model turn.
type Step struct {
	// Text is the assistant text (may be empty when there are tool calls).
	Text      string     `json:"text,omitempty"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`

	// Fault injection: when Status != 0 the server answers this HTTP status
	// (with the provider's error JSON, and a Retry-After header for 429) for
	// the first Times requests that land on this step (Times 0 = 1), then
	// serves the step normally.
	Status       int    `json:"status,omitempty"`
	Times        int    `json:"times,omitempty"`
	RetryAfter   int    `json:"retry_after,omitempty"`
	ErrorMessage string `json:"error_message,omitempty"`
}

// Script is the whole conversation the scripted model plays.
type Script struct {
	Steps []Step `json:"steps"`
	// Branches play other conversations in the same run: a request whose
	// body contains a branch's When (a role's heading in the prompt, say)
	// is answered from that branch's Steps; the first branch that matches
	// wins, and a request no branch matches gets Steps.
	Branches []Branch `json:"branches,omitempty"`
	// SideAnswer is the plain-text answer to requests that carry no tools
	// (titles, summaries, quota checks). Default "ok".
	SideAnswer string `json:"side_answer,omitempty"`
}

// LoadScript reads a script from a JSON file (or YAML when the name ends in
// .yaml or .yml).
func LoadScript(path string) (*Script, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml") {
		data, err = yaml.YAMLToJSON(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	s, err := parseScript(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// parseScript parses a JSON script and validates it.
func parseScript(data []byte) (*Script, error) {
	var s Script
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("parse script: %w", err)
	}
	if err := s.normalize(); err != nil {
		return nil, err
	}
	return &s, nil
}

// Branch is a conversation played for the requests that contain When.
type Branch struct {
	When  string `json:"when"`
	Steps []Step `json:"steps"`
}

// normalize validates the script and compacts tool inputs.
func (s *Script) normalize() error {
	if err := normalizeSteps(s.Steps); err != nil {
		return err
	}
	for i, b := range s.Branches {
		if b.When == "" {
			return fmt.Errorf("branch %d: empty when", i)
		}
		if err := normalizeSteps(b.Steps); err != nil {
			return fmt.Errorf("branch %d: %w", i, err)
		}
	}
	return nil
}

// stepsFor is the conversation a request body plays, and its number (0
// for Steps, i+1 for Branches[i]).
func (s *Script) stepsFor(body []byte) ([]Step, int) {
	for i, b := range s.Branches {
		if bytes.Contains(body, []byte(b.When)) {
			return b.Steps, i + 1
		}
	}
	return s.Steps, 0
}

func normalizeSteps(steps []Step) error {
	for i := range steps {
		st := &steps[i]
		if st.Times < 0 {
			return fmt.Errorf("step %d: negative times", i)
		}
		if st.Status != 0 && (st.Status < 400 || st.Status > 599) {
			return fmt.Errorf("step %d: status %d is not an HTTP error status", i, st.Status)
		}
		for j := range st.ToolCalls {
			tc := &st.ToolCalls[j]
			if tc.Name == "" {
				return fmt.Errorf("step %d tool call %d: empty name", i, j)
			}
			in := bytes.TrimSpace(tc.Input)
			if len(in) == 0 || string(in) == "null" {
				tc.Input = json.RawMessage(`{}`)
				continue
			}
			var buf bytes.Buffer
			if err := json.Compact(&buf, in); err != nil {
				return fmt.Errorf("step %d tool call %d: input: %w", i, j, err)
			}
			tc.Input = json.RawMessage(buf.Bytes())
		}
	}
	return nil
}

func (s *Script) sideAnswer() string {
	if s.SideAnswer == "" {
		return "ok"
	}
	return s.SideAnswer
}
