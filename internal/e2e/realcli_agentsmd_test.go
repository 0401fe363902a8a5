package e2e

import (
	"strings"
	"testing"

	"github.com/ralph-loop/ralph/internal/llmtest"
)

// patternMarker is the pattern story 1 writes into CLAUDE.md's section.
const patternMarker = "e2e-pattern-91ab"

// agentsMarkScript makes the story's file and, for US-001, the patterns
// section of CLAUDE.md.
const agentsMarkScript = `case "$RALPH_ITEM_ID" in
US-001) echo one > one.txt
  printf '# e2e\n\n<!-- ralph:codebase-patterns:begin -->\n## Codebase Patterns\n- ` + patternMarker + `: mark.sh picks the file\n<!-- ralph:codebase-patterns:end -->\n' > CLAUDE.md ;;
US-002) echo two > two.txt ;;
esac
`

// TestRealCLIAgentsMD: --progress agents-md with the real Claude Code.
// Story 1's agent keeps the patterns section of CLAUDE.md (the prompt
// asks for it); it is committed with the story; story 2's Claude Code
// reads CLAUDE.md by itself — its request to the model carries the file
// as Claude Code's own project instructions, not only in ralph's prompt.
func TestRealCLIAgentsMD(t *testing.T) {
	c := cliCases[0]
	requireCLI(t, c.bin)
	dir := newRepo(t, map[string]string{"prd.json": twoStoryPRD})
	srv := startServer(t, &llmtest.Script{Steps: []llmtest.Step{
		{ToolCalls: []llmtest.ToolCall{c.write(dir, "mark.sh", agentsMarkScript)}},
		{ToolCalls: []llmtest.ToolCall{c.shell("sh mark.sh && rm mark.sh")}},
		{Text: "Made the story's file.\n\n<promise>COMPLETE</promise>"},
	}})
	res := ralph(t, dir, nil, runArgs(c, srv, "--max-attempts", "1", "--progress", "agents-md")...)
	if res.code != 0 {
		t.Fatalf("ralph run failed\n%s\n%s", res, transcripts(t, dir, "US-00"))
	}
	if files := git(t, dir, "show", "--name-only", "--format=", "HEAD~1"); !strings.Contains(files, "CLAUDE.md") {
		t.Errorf("US-001's commit does not hold CLAUDE.md: %q", files)
	}
	first, second := promptRequests(srv, "US-001"), promptRequests(srv, "US-002")
	if len(first) == 0 || len(second) == 0 {
		t.Fatalf("no request with the prompt of US-001 (%d) or US-002 (%d)", len(first), len(second))
	}
	if b := string(first[0].Body); !strings.Contains(b, "Learnings in CLAUDE.md (critical)") || strings.Contains(b, patternMarker) {
		t.Errorf("US-001's prompt should ask for the section and not have the pattern yet:\n%s", tail(b, 3000))
	}
	body := string(second[0].Body)

	// Claude Code's own reading of the file: "Contents of PATH (project
	// instructions …):" then the file's text (its HTML comments, the
	// markers, left out).
	head := "Contents of " + dir + "/CLAUDE.md (project instructions"
	at := strings.Index(body, head)
	if at < 0 || !strings.Contains(body[at:min(len(body), at+len(head)+300)], patternMarker) {
		t.Errorf("US-002's request does not carry CLAUDE.md as Claude Code's own instructions:\n%s", tail(body, 4000))
	}
	if !strings.Contains(body, "## Codebase Patterns (from CLAUDE.md)") {
		t.Errorf("US-002's prompt lacks the patterns from CLAUDE.md")
	}
}
