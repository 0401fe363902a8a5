package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMCPServerRunsALoop: `ralph mcp` as a real process over stdio, driven
// by the go-sdk client: create_prd, then run (a background ralph run with
// a scripted agent), status until all_passed; a second run while one is
// active is refused with who holds the lock; tail shows the events.
func TestMCPServerRunsALoop(t *testing.T) {
	dir := newRepo(t, map[string]string{"agent.sh": "cat > /dev/null\nsleep 0.3\necho \"$RALPH_ITEM_ID\" > \"$RALPH_ITEM_ID.txt\"\necho '<promise>COMPLETE</promise>'\n"})
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "mcp")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), asRalph+"=1",
		"GIT_AUTHOR_NAME=ralph e2e", "GIT_AUTHOR_EMAIL=e2e@example.com", "GIT_COMMITTER_NAME=ralph e2e", "GIT_COMMITTER_EMAIL=e2e@example.com")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	callTool := func(name string, args map[string]any) (map[string]any, string, bool) {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var text strings.Builder
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				text.WriteString(tc.Text)
			}
		}
		var out map[string]any
		b, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(b, &out)
		return out, text.String(), res.IsError
	}

	if _, text, isErr := callTool("create_prd", map[string]any{"project": "mcp", "feature": "Two marks", "path": "prd.json"}); isErr {
		t.Fatalf("create_prd: %s", text)
	}
	// The template's one story, and a gate the agent's file satisfies.
	os.WriteFile(dir+"/prd.json", []byte(`{"project":"mcp","branch_name":"ralph/mcp","quality_checks":{"test":"true"},"user_stories":[
 {"id":"US-001","title":"first","priority":1},{"id":"US-002","title":"second","priority":2}]}`), 0o644)
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-qm", "prd")

	out, text, isErr := callTool("run", map[string]any{"agent": "cmd", "agent_cmd": "sh agent.sh"})
	if isErr {
		t.Fatalf("run: %s", text)
	}
	runID, _ := out["run_id"].(string)
	if runID == "" {
		t.Fatalf("run returned no run id: %v", out)
	}
	// Without wait, the run's metadata as it starts, by codetether's names.
	if out["feature_branch"] != "ralph/mcp" || out["total"] != 2.0 || out["all_passed"] != false || out["ready_to_merge"] != false ||
		out["passed"] == nil || out["status"] == nil || out["done"] != false {
		t.Errorf("run without wait returned %v", out)
	}
	if _, text, isErr := callTool("run", map[string]any{"agent": "cmd", "agent_cmd": "sh agent.sh"}); !isErr || !strings.Contains(text, "a run is already active") || !strings.Contains(text, "pid") {
		t.Errorf("a second run: %v %s", isErr, text)
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		st, text, isErr := callTool("status", map[string]any{})
		if !isErr && st["all_passed"] == true && st["ready_to_merge"] == true {
			if st["run_id"] != runID || st["feature_branch"] != "ralph/mcp" || st["passed"] != 2.0 || st["total"] != 2.0 {
				t.Errorf("status %v", st)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run did not finish: %v %s", st, text)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if log := git(t, dir, "log", "--format=%s", "ralph/mcp"); !strings.Contains(log, "feat(US-001)") || !strings.Contains(log, "feat(US-002)") {
		t.Errorf("the branch: %s", log)
	}
	tail, _, isErr := callTool("tail", map[string]any{"n": 3})
	if evs, _ := tail["events"].([]any); isErr || len(evs) != 3 || !strings.Contains(mustJSON(evs[2]), `"run_stopped"`) {
		t.Errorf("tail: %v", tail)
	}
	if res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "ralph://state"}); err != nil || !strings.Contains(res.Contents[0].Text, `"all passed`) && !strings.Contains(res.Contents[0].Text, runID) {
		t.Errorf("ralph://state: %v", err)
	}
	if res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "ralph://progress"}); err != nil || !strings.Contains(res.Contents[0].Text, "story US-002") {
		t.Errorf("ralph://progress: %v", err)
	}
	res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "ralph://transcript/1"})
	if err != nil || !strings.Contains(res.Contents[0].Text, "# ralph iteration 1 · story US-001") {
		t.Errorf("ralph://transcript/1: %v", err)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
