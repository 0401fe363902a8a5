package engine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ralph-loop/ralph/internal/store"
)

// A corrupt state.json is rebuilt from the last run in the event log:
// earlier runs and events of other runs are ignored; statuses, attempts,
// runs, usage and the stop are replayed.
func TestRebuildStateFromEvents(t *testing.T) {
	p := PathsFor(t.TempDir())
	t0 := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	old := &State{RunID: "old", Source: "prd", SourcePath: "/r/prd.json"}
	run := &State{RunID: "r2", Source: "prd", SourcePath: "/r/prd.json", Branch: "ralph/x", Agent: "cmd", MaxIterations: 9, MaxAttempts: 2, StartedAt: t0}
	events := []Event{
		{Type: "run_started", RunID: "old", Data: runFacts(old)},
		{Type: "item_passed", RunID: "old", Item: "Z"},
		{Type: "run_started", RunID: "r2", Data: runFacts(run)},
		{Type: "iteration_started", RunID: "r2", Iteration: 1, Item: "A", Data: map[string]any{"title": "Alpha"}},
		{Type: "agent_finished", RunID: "r2", Iteration: 1, Item: "A", Data: map[string]any{"usage": map[string]any{"input_tokens": 10, "cost_usd": 0.5}}},
		{Type: "item_passed", RunID: "r2", Iteration: 1, Item: "A", Data: map[string]any{"commit": "abc"}},
		{Type: "iteration_started", RunID: "r2", Iteration: 2, Item: "B"},
		{Type: "item_failed", RunID: "r2", Iteration: 2, Item: "B", Attempt: 1, Message: "B attempt 1/2 failed"},
		{Type: "iteration_started", RunID: "r2", Iteration: 3, Item: "B"},
		{Type: "item_failed", RunID: "r2", Iteration: 3, Item: "B", Attempt: 2},
		{Type: "item_blocked", RunID: "r2", Iteration: 3, Item: "B", Message: "B blocked: 2 attempts"},
		{Type: "iteration_started", RunID: "r2", Iteration: 4, Item: "C"},
	}
	for i, ev := range events {
		ev.Time = t0.Add(time.Duration(i) * time.Second)
		if err := store.AppendJSONL(p.Events, ev); err != nil {
			t.Fatal(err)
		}
	}
	os.MkdirAll(filepath.Dir(p.State), 0o700)
	os.WriteFile(p.State, []byte(`{"run_id": "r2", "sou`), 0o600)
	if _, err := LoadState(p.State); err == nil || !strings.Contains(err.Error(), "state.json is corrupt") {
		t.Fatalf("LoadState of a torn file: %v", err)
	}
	st, note, err := LoadOrRebuildState(p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(note, "rebuilt run r2") {
		t.Fatalf("note %q", note)
	}
	if st.RunID != "r2" || st.Branch != "ralph/x" || st.Agent != "cmd" || st.MaxIterations != 9 || st.MaxAttempts != 2 || !st.StartedAt.Equal(t0) {
		t.Fatalf("run facts: %+v", st)
	}
	if strings.Join(st.Order, ",") != "A,B,C" || st.Iteration != 4 || st.Items["Z"] != nil {
		t.Fatalf("order %v, iteration %d, items %v", st.Order, st.Iteration, st.Items)
	}
	a, b, c := st.Items["A"], st.Items["B"], st.Items["C"]
	if a.Status != ItemPassed || a.Commit != "abc" || a.Title != "Alpha" || a.Runs != 1 {
		t.Fatalf("A: %+v", a)
	}
	if b.Status != ItemBlocked || b.Attempts != 2 || b.Runs != 2 || b.Reason != "B blocked: 2 attempts" {
		t.Fatalf("B: %+v", b)
	}
	if c.Status != ItemPending || st.Usage.InputTokens != 10 || st.Usage.CostUSD != 0.5 {
		t.Fatalf("C: %+v, usage %+v", c, st.Usage)
	}
	// Nothing written: the corrupt file is still there for the run to set aside.
	if b, _ := os.ReadFile(p.State); string(b) != `{"run_id": "r2", "sou` {
		t.Fatalf("state.json changed: %q", b)
	}
}
