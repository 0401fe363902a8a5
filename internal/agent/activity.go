package agent

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// Step is one thing an agent did, read from its output stream for people:
// a tool call ("Write add.go", "Bash go test ./..."), its output, or text.
type Step struct {
	Kind string // tool | output | text | error
	Text string
	// Delta: a piece of text that continues the previous text step (a
	// CLI that streams its message in chunks).
	Delta bool
}

// ActivityReader reads an agent's output stream, line by line, as the
// steps it shows people, for the agent named (claude, codex, opencode,
// gemini, copilot; any other agent's output, and a line that is not the CLI's
// JSON, is plain text). Paths under the agent's work folder are shown
// relative to it.
type ActivityReader struct {
	Agent string
	Dir   string // the work folder ("" until the stream names it)
}

// Line is the steps of one line of output.
func (r *ActivityReader) Line(line []byte) []Step {
	t := strings.TrimSpace(string(line))
	if t == "" {
		return nil
	}
	if t[0] != '{' {
		return []Step{{Kind: "text", Text: t}}
	}
	var m map[string]any
	if json.Unmarshal(line, &m) != nil {
		return []Step{{Kind: "text", Text: t}}
	}
	var steps []Step
	switch r.Agent {
	case "claude":
		if m["type"] == "system" && r.Dir == "" {
			r.Dir = str(m, "cwd")
		}
		steps = claudeSteps(m)
	case "codex":
		steps = codexSteps(m)
	case "opencode":
		steps = opencodeSteps(m)
	case "gemini":
		steps = geminiSteps(m)
	case "copilot":
		steps = copilotSteps(m)
	default:
		return []Step{{Kind: "text", Text: t}}
	}
	if r.Dir != "" {
		for i := range steps {
			if steps[i].Kind == "tool" {
				steps[i].Text = strings.ReplaceAll(steps[i].Text, r.Dir+"/", "")
			}
		}
	}
	return steps
}

func str(m map[string]any, keys ...string) string {
	var cur any = m
	for _, k := range keys {
		mm, ok := cur.(map[string]any)
		if !ok {
			return ""
		}
		cur = mm[k]
	}
	switch v := cur.(type) {
	case string:
		return v
	case float64:
		return fmt.Sprint(v)
	}
	return ""
}

// toolStep names a tool call by what it acts on: the file, the command,
// the pattern; else the tool and its arguments, compact.
func toolStep(name string, input map[string]any) Step {
	for _, k := range []string{"command", "cmd", "file_path", "filePath", "path", "absolute_path", "pattern", "query", "url"} {
		if v, ok := input[k]; ok {
			switch v := v.(type) {
			case string:
				return Step{Kind: "tool", Text: name + " " + oneLine(v)}
			case []any:
				var parts []string
				for _, p := range v {
					parts = append(parts, fmt.Sprint(p))
				}
				return Step{Kind: "tool", Text: name + " " + oneLine(strings.Join(parts, " "))}
			}
		}
	}
	keys := make([]string, 0, len(input))
	for k := range input {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var args []string
	for _, k := range keys {
		args = append(args, fmt.Sprintf("%s=%v", k, input[k]))
	}
	return Step{Kind: "tool", Text: strings.TrimSpace(name + " " + oneLine(strings.Join(args, " ")))}
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > 160 {
		s = string(r[:160]) + "…"
	}
	return s
}

func claudeSteps(m map[string]any) []Step {
	msg, _ := m["message"].(map[string]any)
	content, _ := msg["content"].([]any)
	var out []Step
	switch m["type"] {
	case "assistant":
		for _, c := range content {
			c, _ := c.(map[string]any)
			switch c["type"] {
			case "text":
				if t := strings.TrimSpace(str(c, "text")); t != "" {
					out = append(out, Step{Kind: "text", Text: t})
				}
			case "tool_use":
				in, _ := c["input"].(map[string]any)
				out = append(out, toolStep(str(c, "name"), in))
			}
		}
	case "user":
		for _, c := range content {
			c, _ := c.(map[string]any)
			if c["type"] != "tool_result" {
				continue
			}
			switch v := c["content"].(type) {
			case string:
				out = append(out, Step{Kind: "output", Text: v})
			case []any:
				for _, p := range v {
					if p, ok := p.(map[string]any); ok && p["type"] == "text" {
						out = append(out, Step{Kind: "output", Text: str(p, "text")})
					}
				}
			}
		}
	case "result":
		if m["is_error"] == true {
			out = append(out, Step{Kind: "error", Text: str(m, "result")})
		}
	}
	return out
}

func codexSteps(m map[string]any) []Step {
	item, _ := m["item"].(map[string]any)
	switch m["type"] {
	case "item.completed":
		switch item["type"] {
		case "agent_message":
			return []Step{{Kind: "text", Text: strings.TrimSpace(str(item, "text"))}}
		case "command_execution":
			out := []Step{{Kind: "tool", Text: "Bash " + oneLine(unwrapShell(str(item, "command")))}}
			if o := str(item, "aggregated_output"); strings.TrimSpace(o) != "" {
				out = append(out, Step{Kind: "output", Text: o})
			}
			return out
		case "file_change":
			changes, _ := item["changes"].([]any)
			var out []Step
			for _, c := range changes {
				if c, ok := c.(map[string]any); ok {
					out = append(out, Step{Kind: "tool", Text: "Edit " + str(c, "path") + " (" + str(c, "kind") + ")"})
				}
			}
			return out
		case "mcp_tool_call":
			args, _ := item["arguments"].(map[string]any)
			return []Step{toolStep(str(item, "server")+"."+str(item, "tool"), args)}
		case "error":
			return []Step{{Kind: "error", Text: str(item, "message")}}
		}
	case "turn.failed":
		return []Step{{Kind: "error", Text: str(m, "error", "message")}}
	case "error":
		return []Step{{Kind: "error", Text: str(m, "message")}}
	}
	return nil
}

func opencodeSteps(m map[string]any) []Step {
	part, _ := m["part"].(map[string]any)
	switch m["type"] {
	case "text":
		if t := strings.TrimSpace(str(part, "text")); t != "" {
			return []Step{{Kind: "text", Text: t}}
		}
	case "tool_use":
		state, _ := part["state"].(map[string]any)
		in, _ := state["input"].(map[string]any)
		name := str(part, "tool")
		if name != "" {
			name = strings.ToUpper(name[:1]) + name[1:]
		}
		out := []Step{toolStep(name, in)}
		if o := str(state, "output"); strings.TrimSpace(o) != "" {
			out = append(out, Step{Kind: "output", Text: o})
		}
		if e := str(state, "error"); e != "" {
			out = append(out, Step{Kind: "error", Text: e})
		}
		return out
	case "error":
		return []Step{{Kind: "error", Text: firstNonEmpty(str(m, "error", "data", "message"), str(m, "error", "name"))}}
	}
	return nil
}

func geminiSteps(m map[string]any) []Step {
	switch m["type"] {
	case "message":
		if m["role"] != "assistant" {
			return nil
		}
		return []Step{{Kind: "text", Text: str(m, "content"), Delta: m["delta"] == true}}
	case "tool_use":
		in, _ := m["parameters"].(map[string]any)
		return []Step{toolStep(str(m, "tool_name"), in)}
	case "tool_result":
		if o := str(m, "output"); strings.TrimSpace(o) != "" {
			return []Step{{Kind: "output", Text: o}}
		}
		if e := str(m, "error", "message"); e != "" {
			return []Step{{Kind: "error", Text: e}}
		}
	case "error":
		return []Step{{Kind: "error", Text: str(m, "error", "message")}}
	case "result":
		if s := str(m, "status"); s != "" && s != "success" {
			return []Step{{Kind: "error", Text: firstNonEmpty(str(m, "error", "message"), s)}}
		}
	}
	return nil
}

func copilotSteps(m map[string]any) []Step {
	data, _ := m["data"].(map[string]any)
	switch m["type"] {
	case "assistant.message":
		if c := str(m, "data", "content"); strings.TrimSpace(c) != "" {
			return []Step{{Kind: "text", Text: c}}
		}
	case "tool.execution_start":
		in, _ := data["arguments"].(map[string]any)
		return []Step{toolStep(str(m, "data", "toolName"), in)}
	case "tool.execution_complete":
		if data["success"] == false {
			return []Step{{Kind: "error", Text: firstNonEmpty(str(m, "data", "error", "message"), str(m, "data", "result", "content"), "the tool failed")}}
		}
		if o := str(m, "data", "result", "content"); strings.TrimSpace(o) != "" {
			return []Step{{Kind: "output", Text: o}}
		}
	case "session.error":
		return []Step{{Kind: "error", Text: str(m, "data", "message")}}
	}
	return nil
}

// unwrapShell shows the command a CLI ran through a shell ("/bin/bash -c
// 'go test ./...'") as the command itself.
func unwrapShell(c string) string {
	for _, p := range []string{"/bin/bash -lc ", "/bin/bash -c ", "bash -lc ", "bash -c ", "/bin/sh -c ", "sh -c "} {
		if rest, ok := strings.CutPrefix(c, p); ok {
			if n := len(rest); n >= 2 && (rest[0] == '\'' || rest[0] == '"') && rest[n-1] == rest[0] {
				rest = rest[1 : n-1]
			}
			return rest
		}
	}
	return c
}
