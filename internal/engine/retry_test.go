package engine

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ralph-loop/ralph/internal/store"
)

// Retry reopens blocked items only, naming what it refuses; the reopened
// item is pending with its attempts reset, in the state and in a state
// rebuilt from the event log.
func TestRetryReopensBlocked(t *testing.T) {
	p := PathsFor(t.TempDir())
	if err := os.MkdirAll(p.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	st := &State{RunID: "r1", Source: "prd", SourcePath: "/r/prd.json", Status: StatusBlocked, StopReason: "no story can start", MaxAttempts: 2,
		Order: []string{"A", "B"}, Items: map[string]*ItemState{
			"A": {ID: "A", Status: ItemPassed},
			"B": {ID: "B", Status: ItemBlocked, Attempts: 2, Runs: 2, Reason: "failed 2 attempts", LastFailure: "test failed"}}}
	for _, ev := range []Event{{Type: "run_started", RunID: "r1", Data: runFacts(st)}, {Type: "item_passed", RunID: "r1", Item: "A"},
		{Type: "item_failed", RunID: "r1", Item: "B", Attempt: 2}, {Type: "item_blocked", RunID: "r1", Item: "B", Message: "failed 2 attempts"}} {
		ev.Time = t0
		if err := store.AppendJSONL(p.Events, ev); err != nil {
			t.Fatal(err)
		}
	}
	if ids, err := st.Retryable(nil); err != nil || strings.Join(ids, ",") != "B" {
		t.Fatalf("every blocked item: %v %v", ids, err)
	}
	if _, err := st.Retryable([]string{"B", "X"}); err == nil || !strings.Contains(err.Error(), "X: no such item in run r1 (blocked: B)") {
		t.Fatalf("an unknown id: %v", err)
	}
	if _, err := st.Retryable([]string{"A"}); err == nil || !strings.Contains(err.Error(), "A is passed, not blocked") {
		t.Fatalf("a passed id: %v", err)
	}
	ids, _ := st.Retryable([]string{"B", "B"})
	if err := Reopen(p, st, ids, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	saved, err := LoadState(p.State)
	if err != nil {
		t.Fatal(err)
	}
	b := saved.Items["B"]
	if b.Status != ItemPending || b.Attempts != 0 || b.Runs != 0 || b.Reason != "" || b.LastFailure != "test failed" || saved.Status != StatusStopped {
		t.Fatalf("after retry: run %s, B %+v", saved.Status, b)
	}
	if saved.NextStep() != "`ralph run` resumes the run" {
		t.Fatalf("next step %q", saved.NextStep())
	}
	if _, err := saved.Retryable(nil); err == nil {
		t.Fatal("nothing is blocked any more")
	}
	// A state rebuilt from the log (the file torn) reads the retry too.
	if err := os.WriteFile(p.State, []byte("{torn"), 0o600); err != nil {
		t.Fatal(err)
	}
	rebuilt, note, err := LoadOrRebuildState(p)
	if err != nil || note == "" {
		t.Fatalf("rebuild: %v %q", err, note)
	}
	if b := rebuilt.Items["B"]; b.Status != ItemPending || b.Attempts != 0 {
		t.Fatalf("rebuilt B %+v", b)
	}
}
