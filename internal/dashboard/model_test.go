package dashboard

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/ralph-loop/ralph/internal/agent"
	"github.com/ralph-loop/ralph/internal/cluster"
	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/store"
)

// A run's files as the view reads them: the items with their status and
// level, the worker with the agent's activity, the gates, usage; the
// keys act through the controls.
func TestModelRendersTheRun(t *testing.T) {
	root := t.TempDir()
	p := engine.PathsFor(root)
	if err := os.MkdirAll(p.Transcripts, 0o755); err != nil {
		t.Fatal(err)
	}
	prd := filepath.Join(root, "prd.json")
	os.WriteFile(prd, []byte(`{"project":"p","user_stories":[{"id":"S-1","title":"one"},{"id":"S-2","title":"two","depends_on":["S-1"]}]}`), 0o644)
	now := time.Now()
	st := &engine.State{RunID: "r1", Source: "prd", SourcePath: prd, Status: engine.StatusRunning, Iteration: 2, MaxIterations: 20, MaxAttempts: 3,
		Order: []string{"S-1", "S-2"}, Usage: agent.Usage{InputTokens: 12000, OutputTokens: 345, CostUSD: 0.42},
		Items: map[string]*engine.ItemState{
			"S-1": {ID: "S-1", Title: "one", Status: engine.ItemPassed, Usage: &agent.Usage{InputTokens: 9000, CostUSD: 0.3}},
			"S-2": {ID: "S-2", Title: "two", Status: engine.ItemRunning, Attempts: 1},
		},
		Current: []*engine.Current{{Item: "S-2", Iteration: 2, Attempt: 2, Phase: engine.PhaseAgent, StartedAt: now.Add(-75 * time.Second)}}}
	b, _ := json.Marshal(st)
	if err := os.WriteFile(p.State, b, 0o644); err != nil {
		t.Fatal(err)
	}
	tr := filepath.Join(p.Transcripts, "0002-S-2.log")
	os.WriteFile(tr, []byte("# ralph iteration 2 · story S-2 · attempt 2/3 · agent claude\n# started x\n# dir "+root+"\n\n## Prompt\n\nsecret prompt\n\n## Agent output\n\n"+
		`{"type":"assistant","message":{"content":[{"type":"tool_use","name":"Write","input":{"file_path":"`+root+`/add.go"}}]}}`+"\n"+
		`{"type":"assistant","message":{"content":[{"type":"tool_use","name":"Bash","input":{"command":"go test ./..."}}]}}`+"\n"), 0o644)
	os.WriteFile(p.Events, []byte(`{"type":"iteration_started","item":"S-2","iteration":2,"data":{"transcript":"`+tr+`"}}`+"\n"+
		`{"type":"gate_result","item":"S-1","message":"gate test passed (3ms)"}`+"\n"), 0o644)

	var paused []bool
	stopped := false
	m := New(NewFeed(p), Controls{SetPause: func(on bool) error { paused = append(paused, on); return nil }, Stop: func() error { stopped = true; return nil }})
	m.snap.Active = true // no process holds the lock in a test
	out := ansi.ReplaceAllString(m.Render(), "")
	for _, want := range []string{"run r1", "iteration 2/20 · 1/2 passed", "12.3k tokens · $0.42", "✓ S-1", "L1", "L2", "9.0k tok $0.30",
		"S-2 · iteration 2 · attempt 2 · worker · agent · 1:1", "→ Write add.go", "→ Bash go test ./...", "S-1: gate test passed (3ms)"} {
		if !strings.Contains(out, want) {
			t.Errorf("view lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "secret prompt") {
		t.Errorf("the prompt shown as activity:\n%s", out)
	}
	m.Update(tea.KeyPressMsg{Code: 't', Text: "t"})
	if out := m.Render(); strings.Contains(out, "→ Write") {
		t.Errorf("t did not hide the tail:\n%s", out)
	}
	m.Update(tea.KeyPressMsg{Code: 'p', Text: "p"})
	m.Update(tea.KeyPressMsg{Code: 's', Text: "s"})
	if len(paused) != 1 || !paused[0] || !stopped {
		t.Errorf("p and s: paused %v, stopped %v", paused, stopped)
	}
	// g: guidance for every item, typed (the keys type, they do not act
	// on the run), given with enter; G: for the selected item; esc drops.
	type given struct{ text, item string }
	var guided []given
	m.ctl.Guide = func(text, item string) (string, error) {
		guided = append(guided, given{text, item})
		return "g7", nil
	}
	typeText := func(keys ...string) {
		for _, k := range keys {
			switch k {
			case "enter":
				m.Update(tea.KeyPressMsg{Code: tea.KeyEnter})
			case "esc":
				m.Update(tea.KeyPressMsg{Code: tea.KeyEscape})
			case "backspace":
				m.Update(tea.KeyPressMsg{Code: tea.KeyBackspace})
			case " ":
				m.Update(tea.KeyPressMsg{Code: tea.KeySpace, Text: " "})
			default:
				m.Update(tea.KeyPressMsg{Code: rune(k[0]), Text: k})
			}
		}
	}
	typeText("g", "u", "s", "e", " ", "s", "q", "p", "x", "backspace")
	if out := ansi.ReplaceAllString(m.Render(), ""); !strings.Contains(out, "Guidance for every item: use sqp▏") {
		t.Errorf("the guidance being typed is not shown:\n%s", out)
	}
	typeText("enter")
	m.Update(tea.KeyPressMsg{Code: tea.KeyDown})
	typeText("G", "o", "k", "enter", "g", "n", "o", "esc")
	if len(guided) != 2 || guided[0] != (given{"use sqp", ""}) || guided[1] != (given{"ok", "S-2"}) || len(paused) != 1 || stopped != true || m.Closed {
		t.Errorf("g and G gave %v (paused %v)", guided, paused)
	}
	if out := m.Render(); !strings.Contains(out, "g guide") {
		t.Errorf("the keys line lacks g:\n%s", out)
	}
	if _, cmd := m.Update(tea.KeyPressMsg{Code: 'q', Text: "q"}); cmd == nil || !m.Closed {
		t.Error("q does not close the view")
	}
}

// A rate-limit wait shows its countdown; a parallel run's merge queue its
// places; a stopped run no workers but its stop reason.
func TestModelRateLimitQueueAndEnd(t *testing.T) {
	root := t.TempDir()
	p := engine.PathsFor(root)
	os.MkdirAll(p.Dir, 0o755)
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	until := now.Add(37 * time.Second)
	st := &engine.State{RunID: "r2", Source: "prd", Status: engine.StatusRunning, Order: []string{"A", "B"}, RateLimitedAt: &until,
		Items:   map[string]*engine.ItemState{"A": {ID: "A", Status: engine.ItemRunning}, "B": {ID: "B", Status: engine.ItemRunning}},
		Current: []*engine.Current{{Item: "A", Iteration: 1, Phase: engine.PhaseCommit, QueuePos: 1, StartedAt: now}, {Item: "B", Iteration: 2, Phase: engine.PhaseCommit, QueuePos: 2, StartedAt: now}}}
	b, _ := json.Marshal(st)
	os.WriteFile(p.State, b, 0o644)
	m := New(NewFeed(p), Controls{})
	m.now = func() time.Time { return now }
	m.snap.Active = true
	out := ansi.ReplaceAllString(m.Render(), "")
	for _, want := range []string{"rate limited: waiting 0:37", "A · iteration 1 · attempt 0 · worker · commit · 0:00 · merge queue #1", "merge queue #2"} {
		if !strings.Contains(out, want) {
			t.Errorf("view lacks %q:\n%s", want, out)
		}
	}
	st.Status, st.StopReason = engine.StatusBudget, "budget: cost $1.0000 reached --max-cost $1.0000"
	b, _ = json.Marshal(st)
	os.WriteFile(p.State, b, 0o644)
	m.snap = m.feed.Poll() // no process holds the lock: not active
	out = m.Render()
	if out = ansi.ReplaceAllString(out, ""); strings.Contains(out, "Workers") || strings.Contains(out, "rate limited") || !strings.Contains(out, "Run ended: budget — budget: cost $1.0000") {
		t.Errorf("a stopped run:\n%s", out)
	}
}

var ansi = regexp.MustCompile("\x1b\\[[0-9;]*m")

// A coordinator's run shows its remote workers (from the file the
// coordinator mirrors them to) and, for an iteration whose agent runs on
// one, which; a stale file (a coordinator gone) shows none.
func TestModelShowsRemoteWorkers(t *testing.T) {
	root := t.TempDir()
	p := engine.PathsFor(root)
	os.MkdirAll(p.Dir, 0o755)
	now := time.Now()
	st := &engine.State{RunID: "r3", Source: "prd", Status: engine.StatusRunning, Order: []string{"S-1", "S-2"},
		Items:   map[string]*engine.ItemState{"S-1": {ID: "S-1", Status: engine.ItemRunning}, "S-2": {ID: "S-2", Status: engine.ItemRunning}},
		Current: []*engine.Current{{Item: "S-1", Iteration: 1, Phase: engine.PhaseAgent, StartedAt: now}, {Item: "S-2", Iteration: 2, Phase: engine.PhaseVerify, StartedAt: now}}}
	b, _ := json.Marshal(st)
	os.WriteFile(p.State, b, 0o644)
	lock, err := store.TryLock(p.Lock) // the coordinator's run, active
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Unlock()
	ws := []cluster.WorkerInfo{{ID: "build-7-4242", Host: "build-7", Slots: 2, Items: []string{"S-1"}, Seen: now},
		{ID: "gpu-1-77", Host: "gpu-1", Slots: 4, Items: []string{"S-2"}, Agent: "codex", Seen: now}}
	if err := cluster.WriteWorkersFile(p.Dir, ws); err != nil {
		t.Fatal(err)
	}
	m := New(NewFeed(p), Controls{})
	out := ansi.ReplaceAllString(m.Render(), "")
	for _, want := range []string{"Remote workers", "build-7-4242", "2 slots · S-1", "gpu-1-77", "4 slots · S-2 · own agent codex",
		"S-1 · iteration 1 · attempt 0 · worker · agent · 0:00 · build-7-4242 on build-7"} {
		if !strings.Contains(out, want) {
			t.Errorf("view lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "verify · 0:00 · build-7") {
		t.Errorf("S-2's gates run here, not on a worker:\n%s", out)
	}
	old := now.Add(-time.Minute)
	os.Chtimes(filepath.Join(p.Dir, cluster.WorkersFile), old, old)
	m.snap = m.feed.Poll()
	if out := m.Render(); strings.Contains(out, "Remote workers") {
		t.Errorf("a stale workers file is shown:\n%s", out)
	}
}

// A blocked run's view names the next step, as the end of the run and
// ralph status do; a story that passed at once used 1 attempt, one done
// before the run none.
func TestModelBlockedNamesNextStep(t *testing.T) {
	root := t.TempDir()
	p := engine.PathsFor(root)
	os.MkdirAll(p.Dir, 0o755)
	st := &engine.State{RunID: "r3", Source: "prd", Status: engine.StatusBlocked, StopReason: "no story can start: 1 passed, 1 blocked", MaxAttempts: 3,
		Order: []string{"A", "B", "C"}, Items: map[string]*engine.ItemState{"A": {ID: "A", Status: engine.ItemPassed, Runs: 1, Iterations: []int{1}},
			"B": {ID: "B", Status: engine.ItemBlocked, Attempts: 3, Runs: 3}, "C": {ID: "C", Status: engine.ItemPassed}}}
	b, _ := json.Marshal(st)
	os.WriteFile(p.State, b, 0o644)
	m := New(NewFeed(p), Controls{})
	m.snap = m.feed.Poll()
	out := ansi.ReplaceAllString(m.Render(), "")
	for _, want := range []string{"Next: `ralph retry` reopens the blocked story", "passed   attempts 1/3", "blocked  attempts 3/3", "passed   attempts —"} {
		if !strings.Contains(out, want) {
			t.Errorf("view lacks %q:\n%s", want, out)
		}
	}
	st.StopReason = "circuit breaker: the same failure 5 times in a row"
	b, _ = json.Marshal(st)
	os.WriteFile(p.State, b, 0o644)
	m.snap = m.feed.Poll()
	if out := ansi.ReplaceAllString(m.Render(), ""); !strings.Contains(out, "`ralph run --reset-breaker` continues") {
		t.Errorf("an open breaker's view:\n%s", out)
	}
}

// An item whose agent asked a person: "waiting for an answer" on its line
// and in its own section; a types the answer to the selected item's
// question, enter gives it through the Answer control.
func TestModelQuestions(t *testing.T) {
	root := t.TempDir()
	p := engine.PathsFor(root)
	st := &engine.State{RunID: "r1", Source: "prd", Status: engine.StatusRunning, Iteration: 1, MaxIterations: 20, MaxAttempts: 3,
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
	type answered struct{ id, text string }
	var got []answered
	m := New(NewFeed(p), Controls{Answer: func(id, text string) error { got = append(got, answered{id, text}); return nil }})
	m.snap.Active = true
	out := ansi.ReplaceAllString(m.Render(), "")
	for _, want := range []string{"? S-1", "waiting for an answer (q1)", "Waiting for an answer", "q1 S-1: Tabs or spaces?", "a answer the selected item's question"} {
		if !strings.Contains(out, want) {
			t.Errorf("view lacks %q:\n%s", want, out)
		}
	}
	m.Update(tea.KeyPressMsg{Code: 'j', Text: "j"}) // S-2 asked nothing
	m.Update(tea.KeyPressMsg{Code: 'a', Text: "a"})
	if m.typing != nil || !strings.Contains(m.note, "S-2 asked nothing") {
		t.Errorf("a on S-2: typing %v, note %q", m.typing, m.note)
	}
	m.Update(tea.KeyPressMsg{Code: 'k', Text: "k"})
	m.Update(tea.KeyPressMsg{Code: 'a', Text: "a"})
	for _, r := range "tabs" {
		m.Update(tea.KeyPressMsg{Code: r, Text: string(r)})
	}
	if out := ansi.ReplaceAllString(m.Render(), ""); !strings.Contains(out, "Answer to q1 (S-1): tabs") {
		t.Errorf("the answer being typed is not shown:\n%s", out)
	}
	m.Update(tea.KeyPressMsg{Code: tea.KeyEnter})
	if len(got) != 1 || got[0] != (answered{"q1", "tabs"}) || !strings.Contains(m.note, "answered q1") {
		t.Errorf("answered %+v, note %q", got, m.note)
	}
}
