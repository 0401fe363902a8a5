package engine

import (
	"fmt"
	"os"
	"strings"
)

// Learnings where the agents read them (`progress: agents-md`): the
// codebase-patterns head of the progress memory lives in the agents'
// own instructions file (AGENTS.md; CLAUDE.md for Claude Code), between
// two markers, so every agent CLI reads it by itself at its start. The
// agents keep the section (the prompt asks them to), so it is part of
// each item's work: committed with it and judged by its gates. ralph's
// own entries stay in .ralph/progress.md.

// The markers around the section, and its heading.
const (
	AgentsPatternsBegin   = "<!-- ralph:codebase-patterns:begin -->"
	AgentsPatternsEnd     = "<!-- ralph:codebase-patterns:end -->"
	agentsPatternsHeading = "## Codebase Patterns"
)

// agentsSection asks the agent to keep the patterns between the markers.
const agentsSection = `
## Learnings in %[1]s (critical)

%[1]s at the repository root is what every agent reads first, by itself. Before you finish, put what the next iteration must know about this codebase — how it does things, the commands that check it, the pitfalls you hit — as short bullet points in the section between these two lines of %[1]s (add them at the end of the file, with the heading, if they are missing; keep the rest of the file as it is):

    %[2]s
    %[4]s
    - …
    %[3]s

Keep the section short and true: merge a new learning into an existing bullet rather than repeat it, and remove what is no longer so. It is committed with your work and checked like it.
`

// AgentsPatterns is the text between the markers of an instructions
// file, without its heading ("" when the file or the markers are
// missing, or the end marker comes first).
func AgentsPatterns(text string) string {
	i := strings.Index(text, AgentsPatternsBegin)
	if i < 0 {
		return ""
	}
	body := text[i+len(AgentsPatternsBegin):]
	j := strings.Index(body, AgentsPatternsEnd)
	if j < 0 {
		return ""
	}
	body = strings.TrimSpace(body[:j])
	if h, rest, ok := strings.Cut(body, "\n"); ok && strings.EqualFold(strings.TrimSpace(h), agentsPatternsHeading) {
		body = strings.TrimSpace(rest)
	} else if strings.EqualFold(body, agentsPatternsHeading) {
		body = ""
	}
	return body
}

// digestAgents is what a prompt carries of the memory under
// `progress: agents-md`: the patterns between the markers of the
// instructions file (within the patterns' share), then the digest of
// ralph's own progress file.
func (m *memory) digestAgents(file, display, progress string) string {
	rest := m.digest(progress)
	b, err := os.ReadFile(file)
	if err != nil {
		return rest
	}
	patterns := AgentsPatterns(string(b))
	if patterns == "" {
		return rest
	}
	if len(patterns) > m.patternsMax {
		patterns = cutAtLine(patterns, m.patternsMax) + "\n(cut to the budget; the whole section is in " + display + ")"
	}
	return strings.TrimSpace(fmt.Sprintf("%s (from %s)\n\n%s\n\n%s", agentsPatternsHeading, display, patterns, rest))
}
