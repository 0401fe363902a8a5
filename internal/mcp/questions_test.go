package mcp_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ralph-loop/ralph/internal/engine"
)

// An item whose agent asked a person (ralph ask) is "waiting for an
// answer" in the status tool, which lists the questions; once answered
// (ralph answer), the answer is there and the item is pending again.
func TestMCPStatusQuestions(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir()) // the run's key
	dir := gitRepo(t)
	p := engine.PathsFor(dir)
	st := &engine.State{Version: 1, RunID: "r1", Source: "prd", SourcePath: dir + "/prd.json", Status: engine.StatusRunning, MaxIterations: 10, MaxAttempts: 3,
		Order: []string{"S-1", "S-2"}, Items: map[string]*engine.ItemState{
			"S-1": {ID: "S-1", Title: "one", Status: engine.ItemPending},
			"S-2": {ID: "S-2", Title: "two", Status: engine.ItemPending},
		}}
	b, _ := json.Marshal(st)
	if err := os.MkdirAll(p.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p.State, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := engine.RecordQuestions(p, "r1", "S-1", 1, []engine.Asked{{Text: "Tabs or spaces?"}}, false, time.Now()); err != nil {
		t.Fatal(err)
	}
	cs := mcpSession(t, dir)
	text, out, isErr := call(t, cs, "status", map[string]any{})
	if isErr {
		t.Fatalf("status: %s", text)
	}
	items, _ := out["items"].([]any)
	qs, _ := out["questions"].([]any)
	if len(items) != 2 || items[0].(map[string]any)["status"] != "waiting for an answer" || items[1].(map[string]any)["status"] != "pending" {
		t.Errorf("items = %v", items)
	}
	if len(qs) != 1 || qs[0].(map[string]any)["id"] != "q1" || qs[0].(map[string]any)["text"] != "Tabs or spaces?" || qs[0].(map[string]any)["answer"] != nil {
		t.Errorf("questions = %v", qs)
	}
	if _, err := engine.AnswerQuestion(p, "q1", "tabs", "ralph answer", time.Now()); err != nil {
		t.Fatal(err)
	}
	_, out, _ = call(t, cs, "status", map[string]any{})
	qs, _ = out["questions"].([]any)
	if items, _ := out["items"].([]any); len(qs) != 1 || qs[0].(map[string]any)["answer"] != "tabs" || !strings.Contains(items[0].(map[string]any)["status"].(string), "pending") {
		t.Errorf("after the answer: questions %v items %v", qs, out["items"])
	}
}
