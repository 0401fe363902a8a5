package dashboard

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/store"
)

var t0 = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

// at is t0 plus s seconds.
func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

func ev(s float64, typ string, iter int, item string, data map[string]any) engine.Event {
	return engine.Event{Time: at(s), Type: typ, Iteration: iter, Item: item, Message: item + " " + strings.ReplaceAll(typ, "_", " "), Data: data}
}

// writeEvents writes evs as the run's events.jsonl.
func writeEvents(t *testing.T, p engine.Paths, evs ...engine.Event) {
	t.Helper()
	os.MkdirAll(p.Dir, 0o755)
	os.Remove(p.Events)
	for _, e := range evs {
		if err := store.AppendJSONL(p.Events, e); err != nil {
			t.Fatal(err)
		}
	}
}

// The history of a parallel run as its events tell it: each iteration's
// agent, gates (their time ends where the gate results come) and
// outcome; a story verified in its own tree gives its slot back when it
// enters the merge queue; a failure then a block is one blocked
// iteration; a rate limit is a wait of the whole run; an iteration cut
// by a crash ends interrupted and its recovery is a bar of its own; a
// question to a person is a wait inside the iteration.
func TestHistory(t *testing.T) {
	p := engine.PathsFor(t.TempDir())
	usage := map[string]any{"input_tokens": 1000.0, "output_tokens": 200.0, "cost_usd": 0.05}
	writeEvents(t, p,
		ev(0, "run_started", 0, "", nil),
		ev(0.1, "iteration_started", 1, "A", map[string]any{"title": "first", "agent": "claude", "transcript": "/nowhere/1.log"}),
		ev(0.2, "iteration_started", 2, "B", map[string]any{"title": "second", "role": "reviewer"}),
		ev(2, "agent_finished", 1, "A", map[string]any{"usage": usage}),
		ev(3, "gate_result", 1, "A", map[string]any{"gate": "test", "passed": true, "duration_ms": 500.0}),
		ev(3, "gate_result", 1, "A", map[string]any{"gate": "lint", "passed": true, "duration_ms": 300.0}),
		ev(3.1, "merge_queued", 1, "A", nil),
		ev(4, "item_passed", 1, "A", nil),
		ev(2.5, "agent_finished", 2, "B", nil),
		ev(2.6, "gate_result", 2, "B", map[string]any{"gate": "test", "passed": false, "duration_ms": 50.0}),
		ev(2.7, "item_failed", 2, "B", nil),
		ev(2.7, "item_blocked", 2, "B", nil),
		ev(5, "iteration_started", 3, "C", nil),
		ev(6, "rate_limited", 3, "C", map[string]any{"until": at(60).Format(time.RFC3339Nano)}),
		ev(61, "iteration_started", 4, "C", nil),
		ev(62, QuestionAsked, 4, "C", nil),
		ev(70, QuestionAnswered, 4, "C", nil),
		ev(75, "run_resumed", 0, "", nil),
		ev(76, "recovered", 4, "C", nil),
		ev(80, "item_passed", 4, "C", nil),
	)
	f := NewFeed(p)
	h := f.PollHistory().History
	if h == nil || len(h.Iterations) != 5 {
		t.Fatalf("iterations: %+v", h)
	}
	a, b, c1, c2, c3 := h.Iterations[0], h.Iterations[1], h.Iterations[2], h.Iterations[3], h.Iterations[4]
	if a.Outcome != OutcomePassed || a.Title != "first" || a.Agent != "claude" || a.Role != "worker" || !a.AgentEnd.Equal(at(2)) || !a.GateEnd.Equal(at(3)) ||
		!a.GateStart.Equal(at(2.2)) || !a.SlotEnd.Equal(at(3.1)) || !a.End.Equal(at(4)) || a.Usage.InputTokens != 1000 || a.Usage.CostUSD != 0.05 || !a.Queued {
		t.Errorf("A: %+v", a)
	}
	if b.Outcome != OutcomeBlocked || b.Role != "reviewer" || !b.End.Equal(at(2.7)) || len(b.Gates) != 1 || b.Gates[0].Passed || !b.GateStart.Equal(at(2.55)) {
		t.Errorf("B: %+v", b)
	}
	if c1.Outcome != OutcomeRateLimited || !c1.WaitUntil.Equal(at(60)) || len(h.Waits) != 1 || !h.Waits[0].From.Equal(at(6)) || !h.Waits[0].Until.Equal(at(60)) {
		t.Errorf("C's rate limit: %+v, waits %+v", c1, h.Waits)
	}
	if c2.Outcome != OutcomeInterrupted || !c2.Asked.Equal(at(62)) || !c2.Answered.Equal(at(70)) || !c2.End.Equal(at(70)) {
		t.Errorf("C cut by the crash: %+v", c2)
	}
	if c3.Number != 4 || c3.Outcome != OutcomePassed || !c3.Start.Equal(at(76)) || !c3.End.Equal(at(80)) {
		t.Errorf("C recovered: %+v", c3)
	}
	if len(h.Passes) != 2 || h.Passes[1].Item != "C" || !h.Start.Equal(at(0)) || !h.Last.Equal(at(80)) {
		t.Errorf("passes %+v, start %v, last %v", h.Passes, h.Start, h.Last)
	}
	// A question not yet answered: the iteration waits.
	f2 := NewFeed(engine.PathsFor(t.TempDir()))
	writeEvents(t, f2.Paths, ev(0, "iteration_started", 1, "D", nil), ev(1, QuestionAsked, 1, "D", nil))
	if d := f2.PollHistory().History.Iterations[0]; d.Outcome != OutcomeWaiting || !d.End.IsZero() {
		t.Errorf("D waits: %+v", d)
	}
}

// A coordinator's iterations name the worker machine that ran them: read
// from the transcript of a finished one, from the tail of one under way;
// a local run's transcripts name none.
func TestHistoryWorkers(t *testing.T) {
	p := engine.PathsFor(t.TempDir())
	dir := t.TempDir()
	remote := filepath.Join(dir, "0001-A.log")
	local := filepath.Join(dir, "0002-B.log")
	os.WriteFile(remote, []byte("# ralph iteration 1 · story A · attempt 1/3 · agent claude\n\n## Prompt\n\nsay [ralph] worker x on y ran job z\n\n## Agent output\n\n[ralph] job k1 queued\n[ralph] job k1 taken by worker w-1 on host-a\nhello\n"), 0o644)
	os.WriteFile(local, []byte("## Agent output\nworking\n[ralph] job k2 taken by worker w-9 on host-z\n"), 0o644)
	writeEvents(t, p,
		ev(0, "iteration_started", 1, "A", map[string]any{"transcript": remote}),
		ev(1, "item_passed", 1, "A", nil),
		ev(0, "iteration_started", 2, "B", map[string]any{"transcript": local}),
		ev(1, "item_failed", 2, "B", nil))
	h := NewFeed(p).PollHistory().History
	if h.Iterations[0].Worker != "w-1 on host-a" || h.Iterations[1].Worker != "" {
		t.Errorf("workers: %q %q", h.Iterations[0].Worker, h.Iterations[1].Worker)
	}
}

// The renderer `ralph log` and the story page share: the prompt folded,
// ralph's lines as they are, long tool output folded.
func TestLogRenderer(t *testing.T) {
	var b strings.Builder
	r := NewLogRenderer(&b, false)
	for _, l := range strings.Split("# ralph iteration 1 · story A · attempt 1/3 · agent cmd\n# dir /x\n\n## Prompt\n\nline one\nline two\n\n## Agent output\n\nworking\n=== gate test: go test\n=== gate test: passed (exit 0, 1ms)", "\n") {
		r.Line(l)
	}
	r.Flush()
	out := b.String()
	for _, want := range []string{"# ralph iteration 1", "## Prompt (4 lines folded; --raw shows them)", "## Agent output", "working", "=== gate test: passed (exit 0, 1ms)"} {
		if !strings.Contains(out, want) {
			t.Errorf("rendered lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "line one") || strings.Contains(out, "# dir") {
		t.Errorf("the prompt or the work folder shown:\n%s", out)
	}
}
