package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ralph-loop/ralph/internal/agent"
	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/llmtest"
)

// TestRealClaudeMCPCreatePRDRunWait: the real Claude Code as ralph's MCP
// client, using codetether's tool interface by its own names: create-prd
// (project, feature, prd_path) writes a PRD that carries the repository's
// quality checks (a Makefile's test target), and run (prd_path,
// max_iterations, wait: true) returns when the loop ends, with
// all_passed, ready_to_merge, feature_branch, passed and total — no
// polling, and no gateless refusal.
func TestRealClaudeMCPCreatePRDRunWait(t *testing.T) {
	requireCLI(t, "claude")
	for k, v := range map[string]string{"GIT_AUTHOR_NAME": "ralph e2e", "GIT_AUTHOR_EMAIL": "e2e@example.com", "GIT_COMMITTER_NAME": "ralph e2e", "GIT_COMMITTER_EMAIL": "e2e@example.com"} {
		t.Setenv(k, v)
	}
	dir := newRepo(t, map[string]string{
		// Red at the base: the story's work turns it green, its evidence.
		"Makefile": "test:\n\tgrep -q US-001 US-001.txt\n",
		"agent.sh": "cat > /dev/null\necho \"$RALPH_ITEM_ID\" > \"$RALPH_ITEM_ID.txt\"\necho '<promise>COMPLETE</promise>'\n",
	})
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	mcpCall := func(tool string, in map[string]any) llmtest.ToolCall { return tc("mcp__ralph__"+tool, in) }
	shell := cliCases[0].shell
	srv := startServer(t, &llmtest.Script{Steps: []llmtest.Step{
		{ToolCalls: []llmtest.ToolCall{mcpCall("create-prd", map[string]any{"project": "MyProject", "feature": "New Feature", "prd_path": "prd.json"})}},
		{ToolCalls: []llmtest.ToolCall{shell("git add prd.json && git commit -qm 'the PRD'")}},
		{ToolCalls: []llmtest.ToolCall{mcpCall("run", map[string]any{"prd_path": "prd.json", "max_iterations": 10, "wait": true, "agent": "cmd", "agent_cmd": "sh agent.sh"})}},
		{ToolCalls: []llmtest.ToolCall{mcpCall("status", map[string]any{"prd_path": "prd.json"})}},
		{Text: "e2e-mcp-wait-done"},
	}})
	a, err := agent.New("claude", agent.Options{BaseURL: srv.URL(), Args: claudeMCPArgs(t, self)})
	if err != nil {
		t.Fatal(err)
	}
	var tr bytes.Buffer
	res, err := a.Run(t.Context(), agent.Request{Prompt: "Create a PRD with ralph, run it to the end and report.", Dir: dir, Timeout: 3 * time.Minute, Transcript: &tr})
	if err != nil || res.Failed() {
		t.Fatalf("claude: %v %+v\n%s", err, res, tail(tr.String(), 4000))
	}
	if !strings.Contains(res.FinalText, "e2e-mcp-wait-done") {
		t.Errorf("final text %q", res.FinalText)
	}
	if prd, err := os.ReadFile(filepath.Join(dir, "prd.json")); err != nil || !strings.Contains(string(prd), `"test": "make test"`) {
		t.Errorf("create-prd wrote %s (%v)", prd, err)
	}
	if log := git(t, dir, "log", "--format=%s", "feature/new-feature"); !strings.Contains(log, "feat(US-001): First user story") {
		t.Errorf("the branch:\n%s\ntranscript:\n%s", log, tail(tr.String(), 4000))
	}
	if st := loadState(t, dir); st.Status != engine.StatusComplete {
		t.Errorf("state %s", st.Status)
	}
	// run's own result (wait: true) reached the model, by codetether's
	// names, before status was asked.
	var runResult string
	for _, r := range srv.Requests() {
		body := strings.ReplaceAll(string(r.Body), `\"`, `"`)
		if strings.Contains(body, `"done":true`) && runResult == "" {
			runResult = body
		}
	}
	for _, want := range []string{`"all_passed":true`, `"ready_to_merge":true`, `"feature_branch":"feature/new-feature"`, `"passed":1`, `"total":1`, `"exit_code":0`} {
		if !strings.Contains(runResult, want) {
			t.Errorf("run's result lacks %s: %s", want, tail(runResult, 2000))
		}
	}
}
