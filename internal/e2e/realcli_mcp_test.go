package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ralph-loop/ralph/internal/agent"
	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/llmtest"
)

const mcpPRD = `{"project":"mcp","branch_name":"ralph/mcp","quality_checks":{"test":"true"},"user_stories":[{"id":"US-001","title":"first","priority":1,"checks":["test -f US-001.txt"]},{"id":"US-002","title":"second","priority":2,"checks":["test -f US-002.txt"]}]}`

// TestRealCLIMCPClient: the real Claude Code, Codex and opencode CLIs as
// ralph's MCP clients. The scripted model calls create_prd, writes the stories with
// its shell tool, calls run (a background loop with a scripted agent),
// waits, and calls status; the test checks the repository (a commit per
// story), ralph's state, and that the tools' results reached the model.
// (Gemini CLI is not: see the README.)
func TestRealCLIMCPClient(t *testing.T) {
	for _, c := range cliCases[:3] {
		t.Run(c.name, func(t *testing.T) { testMCPClient(t, c) })
	}
}

// claudeMCPArgs are Claude Code's arguments that give it ralph (the binary
// self, run as ralph) as its MCP server "ralph".
func claudeMCPArgs(t *testing.T, self string) []string {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "mcp.json")
	b, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"ralph": map[string]any{
		"type": "stdio", "command": self, "args": []string{"mcp"}, "env": map[string]string{asRalph: "1"}}}})
	if err := os.WriteFile(cfg, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return []string{"--mcp-config", cfg}
}

func testMCPClient(t *testing.T, c cliCase) {
	requireCLI(t, c.bin)
	for k, v := range map[string]string{"GIT_AUTHOR_NAME": "ralph e2e", "GIT_AUTHOR_EMAIL": "e2e@example.com", "GIT_COMMITTER_NAME": "ralph e2e", "GIT_COMMITTER_EMAIL": "e2e@example.com"} {
		t.Setenv(k, v)
	}
	dir := newRepo(t, map[string]string{"agent.sh": "cat > /dev/null\necho \"$RALPH_ITEM_ID\" > \"$RALPH_ITEM_ID.txt\"\necho '<promise>COMPLETE</promise>'\n"})
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// How each CLI is given the server, and how its model calls a tool of
	// it: Claude Code's mcp__<server>__<tool>; Codex's tool in the
	// mcp__<server> namespace of the Responses API; opencode's
	// <server>_<tool>, from the project's opencode.json.
	var args []string
	mcpCall := func(tool string, in map[string]any) llmtest.ToolCall { return tc("mcp__ralph__"+tool, in) }
	switch c.name {
	case "claude":
		args = claudeMCPArgs(t, self)
	case "codex":
		args = []string{"-c", `mcp_servers.ralph.command="` + self + `"`, "-c", `mcp_servers.ralph.args=["mcp"]`, "-c", `mcp_servers.ralph.env={` + asRalph + `="1"}`}
		mcpCall = func(tool string, in map[string]any) llmtest.ToolCall {
			call := tc(tool, in)
			call.Namespace = "mcp__ralph"
			return call
		}
	case "opencode":
		b, _ := json.Marshal(map[string]any{"$schema": "https://opencode.ai/config.json", "mcp": map[string]any{"ralph": map[string]any{
			"type": "local", "command": []string{self, "mcp"}, "environment": map[string]string{asRalph: "1"}, "enabled": true}}})
		if err := os.WriteFile(filepath.Join(dir, "opencode.json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		mcpCall = func(tool string, in map[string]any) llmtest.ToolCall { return tc("ralph_"+tool, in) }
	}
	srv := startServer(t, &llmtest.Script{Steps: []llmtest.Step{
		{ToolCalls: []llmtest.ToolCall{mcpCall("create_prd", map[string]any{"project": "mcp", "feature": "Two marks", "path": "prd.json"})}},
		// Not the CLI's own private home (.ralph/agents): it is no part
		// of the project, and changes while the run's gates run.
		{ToolCalls: []llmtest.ToolCall{c.shell("printf '%s' '" + mcpPRD + "' > prd.json && git add -A -- . ':!.ralph' && git commit -qm 'the stories'")}},
		{ToolCalls: []llmtest.ToolCall{mcpCall("run", map[string]any{"agent": "cmd", "agent_cmd": "sh agent.sh"})}},
		// The run goes on in the background: wait until it is done (its
		// agents and gates start sandboxes, slower on a loaded machine).
		{ToolCalls: []llmtest.ToolCall{c.shell(`for i in $(seq 90); do grep -Eqs '"status": ?"complete"' .ralph/state.json && break; sleep 1; done`)}},
		{ToolCalls: []llmtest.ToolCall{mcpCall("status", map[string]any{})}},
		{Text: "e2e-mcp-done: the loop ran; every story passed."},
	}})
	a, err := agent.New(c.name, agent.Options{BaseURL: srv.URL(), Args: args})
	if err != nil {
		t.Fatal(err)
	}
	var tr bytes.Buffer
	res, err := a.Run(t.Context(), agent.Request{Prompt: "Create a PRD with ralph, run its loop and report the status.", Dir: dir, Timeout: 2 * time.Minute, Transcript: &tr})
	if err != nil || res.Failed() {
		t.Fatalf("claude: %v %+v\n%s", err, res, tail(tr.String(), 4000))
	}
	if !strings.Contains(res.FinalText, "e2e-mcp-done") {
		t.Errorf("final text %q", res.FinalText)
	}
	if log := git(t, dir, "log", "--format=%s", "ralph/mcp"); !strings.Contains(log, "feat(US-001): first") || !strings.Contains(log, "feat(US-002): second") {
		t.Errorf("the branch:\n%s\ntranscript:\n%s", log, tail(tr.String(), 4000))
	}
	if st := loadState(t, dir); st.Status != engine.StatusComplete || st.Items["US-002"].Status != engine.ItemPassed {
		t.Errorf("state %s %+v", st.Status, st.Items["US-002"])
	}
	// The tools' results reached the model: the run id, then all_passed.
	var sawRun, sawStatus bool
	for _, r := range srv.Requests() {
		body := string(r.Body)
		sawRun = sawRun || strings.Contains(body, `run_id`)
		sawStatus = sawStatus || strings.Contains(body, `\"all_passed\":true`) || strings.Contains(body, `"all_passed":true`)
	}
	if !sawRun || !sawStatus {
		t.Errorf("the model saw the run's id %v and the status %v", sawRun, sawStatus)
	}
	// Every tool reached the model by its own name: none renamed with a
	// hash to break a collision (Codex's "-" to "_" made create-prd one
	// with create_prd).
	// (The first request the agent's turn made: opencode asks for a
	// title beside it, with no tools, and that may come first.)
	for _, r := range srv.Requests() {
		if r.Side {
			continue
		}
		first := string(r.Body)
		if !strings.Contains(first, "create_prd") || regexp.MustCompile(`create_prd_[0-9a-f]{4,}`).MatchString(first) {
			t.Errorf("the tools offered to the model: %s", tail(first, 3000))
		}
		break
	}
}
