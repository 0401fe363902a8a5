package web

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/judge"
	"github.com/ralph-loop/ralph/internal/store"
)

var t0 = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

// ev is an event s seconds after t0.
func ev(s float64, typ string, iter int, item string, attempt int, data map[string]any) engine.Event {
	return engine.Event{Time: t0.Add(time.Duration(s * float64(time.Second))), Type: typ, Iteration: iter, Item: item, Attempt: attempt,
		Message: fmt.Sprintf("%s %s", item, strings.ReplaceAll(typ, "_", " ")), Data: data}
}

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

// gitRun runs git in dir.
func gitRun(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// story is a PRD story of the fixtures.
type story struct {
	ID, Title string
	Deps      []string
	Checks    []string
	Criteria  []string
}

// prdRun is a repository with a PRD of stories and a run of it at
// parallel 2: a git repository whose remote is on GitHub, its state
// (statuses by story) and the transcripts of iterations.
type prdRun struct {
	t     *testing.T
	p     engine.Paths
	st    *engine.State
	prd   string
	srv   *httptest.Server
	token string
}

func newPRDRun(t *testing.T, stories []story, statuses map[string]string) *prdRun {
	t.Helper()
	root := t.TempDir()
	gitRun(t, root, "init", "-q", "-b", "main")
	gitRun(t, root, "remote", "add", "origin", "git@github.com:acme/shop.git")
	var us []map[string]any
	for _, s := range stories {
		us = append(us, map[string]any{"id": s.ID, "title": s.Title, "depends_on": s.Deps, "checks": s.Checks, "acceptance_criteria": s.Criteria, "priority": 1})
	}
	doc, _ := json.Marshal(map[string]any{"project": "shop", "branch_name": "main", "quality_checks": map[string]string{"test": "go test ./..."}, "user_stories": us})
	prd := filepath.Join(root, "prd.json")
	os.WriteFile(prd, doc, 0o644)
	gitRun(t, root, "add", "prd.json")
	gitRun(t, root, "commit", "-qm", "init")
	p := engine.PathsFor(root)
	os.MkdirAll(p.Transcripts, 0o755)
	st := &engine.State{RunID: "r1", Source: "prd", SourcePath: prd, Branch: "main", Status: engine.StatusComplete, StartedAt: t0, Iteration: 0, MaxIterations: 50, MaxAttempts: 3,
		Parallel: 2, MaxCost: 2, Agent: "claude", Items: map[string]*engine.ItemState{}}
	for _, s := range stories {
		st.Order = append(st.Order, s.ID)
		status := statuses[s.ID]
		if status == "" {
			status = engine.ItemPending
		}
		st.Items[s.ID] = &engine.ItemState{ID: s.ID, Title: s.Title, Status: status}
	}
	return &prdRun{t: t, p: p, st: st, prd: prd}
}

// commit makes a commit of story id on the branch (a file of its own)
// and records it as the story's.
func (r *prdRun) commit(id string, record bool) string {
	os.WriteFile(filepath.Join(r.p.Root, id+".txt"), []byte(id+"\nline two\n"), 0o644)
	gitRun(r.t, r.p.Root, "add", id+".txt")
	gitRun(r.t, r.p.Root, "commit", "-qm", "feat("+id+")\n\nRalph-Story: "+id+"\nRalph-Run: r0")
	sha := gitRun(r.t, r.p.Root, "rev-parse", "HEAD")
	if record {
		r.st.Items[id].Commit = sha
	}
	return sha
}

// transcript writes iteration n's transcript and returns its path.
func (r *prdRun) transcript(n int, id, text string) string {
	path := filepath.Join(r.p.Transcripts, fmt.Sprintf("%04d-%s.log", n, id))
	os.WriteFile(path, []byte(text), 0o644)
	return path
}

// serve writes the state and starts the server (with a token).
func (r *prdRun) serve() {
	b, _ := json.Marshal(r.st)
	os.WriteFile(r.p.State, b, 0o644)
	if r.srv == nil {
		r.token = testToken
		r.srv = httptest.NewServer(New(r.p, r.token).Handler())
		r.t.Cleanup(r.srv.Close)
	}
}

// get answers path with the token.
func (r *prdRun) get(path string) string {
	r.t.Helper()
	code, body := do(r.t, nil, "GET", r.srv.URL+path, nil, "Authorization", "Bearer "+r.token)
	if code != 200 {
		r.t.Fatalf("GET %s: %d %s", path, code, body)
	}
	return body
}

// five is the DAG of the timeline's tests: A, then B and C after it, D
// after B, E after C and D.
var five = []story{{ID: "A", Title: "cart"}, {ID: "B", Title: "prices", Deps: []string{"A"}}, {ID: "C", Title: "tax", Deps: []string{"A"}},
	{ID: "D", Title: "checkout", Deps: []string{"B"}, Checks: []string{"test -f D.txt"}, Criteria: []string{"a cart checks out"}}, {ID: "E", Title: "history", Deps: []string{"C", "D"}}}

// fiveRun is a parallel run of five: C fails once and passes on its
// retry; D is rate-limited once, then passes; E runs.
func fiveRun(t *testing.T) *prdRun {
	r := newPRDRun(t, five, map[string]string{"A": "passed", "B": "passed", "C": "passed", "D": "passed", "E": "running"})
	u := func(in, out float64, usd float64) map[string]any {
		return map[string]any{"usage": map[string]any{"input_tokens": in, "output_tokens": out, "cost_usd": usd}}
	}
	start := func(n int, id string, extra map[string]any) map[string]any {
		d := map[string]any{"title": id, "agent": "claude", "transcript": r.transcript(n, id, "# ralph iteration\n\n## Agent output\n\nworking\n")}
		for k, v := range extra {
			d[k] = v
		}
		return d
	}
	gate := func(ms float64, ok bool) map[string]any {
		return map[string]any{"gate": "test", "passed": ok, "duration_ms": ms}
	}
	writeEvents(t, r.p,
		ev(0, "run_started", 0, "", 0, nil),
		ev(0, "iteration_started", 1, "A", 1, start(1, "A", nil)),
		ev(8, "agent_finished", 1, "A", 1, u(10000, 2000, 0.20)),
		ev(10, "gate_result", 1, "A", 0, gate(2000, true)),
		ev(10, "item_passed", 1, "A", 0, nil),
		ev(10, "iteration_started", 2, "B", 1, start(2, "B", nil)),
		ev(10, "iteration_started", 3, "C", 1, start(3, "C", nil)),
		ev(15, "agent_finished", 3, "C", 1, u(8000, 1000, 0.15)),
		ev(16, "gate_result", 3, "C", 0, gate(1000, false)),
		ev(16, "item_failed", 3, "C", 1, nil),
		ev(17, "iteration_started", 4, "C", 2, start(4, "C", map[string]any{"agent": "codex"})),
		ev(20, "agent_finished", 2, "B", 1, u(12000, 3000, 0.30)),
		ev(21, "gate_result", 2, "B", 0, gate(1000, true)),
		ev(21, "merge_queued", 2, "B", 0, nil),
		ev(22, "item_passed", 2, "B", 0, nil),
		ev(22, "iteration_started", 5, "D", 1, start(5, "D", nil)),
		ev(23, "agent_finished", 5, "D", 1, nil),
		ev(23, "rate_limited", 5, "D", 0, map[string]any{"until": t0.Add(30 * time.Second).Format(time.RFC3339Nano)}),
		ev(24, "agent_finished", 4, "C", 2, u(5000, 500, 0.10)),
		ev(25, "gate_result", 4, "C", 0, gate(1000, true)),
		ev(25, "item_passed", 4, "C", 0, nil),
		ev(30, "iteration_started", 6, "D", 1, start(6, "D", map[string]any{"role": "reviewer"})),
		ev(38, "agent_finished", 6, "D", 1, u(9000, 900, 0.12)),
		ev(40, "gate_result", 6, "D", 0, gate(2000, true)),
		ev(40, "item_passed", 6, "D", 0, nil),
		ev(40, "iteration_started", 7, "E", 1, start(7, "E", nil)),
		ev(45, "agent_finished", 7, "E", 1, u(4000, 400, 0.05)),
	)
	r.st.Iteration = 7
	for id, its := range map[string][]int{"A": {1}, "B": {2}, "C": {3, 4}, "D": {6}, "E": {7}} {
		r.st.Items[id].Iterations, r.st.Items[id].Runs = its, len(its)
	}
	r.st.Items["C"].Attempts = 1
	r.st.Usage.InputTokens, r.st.Usage.OutputTokens, r.st.Usage.CostUSD = 48000, 7800, 0.92
	r.serve()
	return r
}

// The timeline as data: a bar per iteration on the run's two slots (a
// retry in its failure's row), its agent and gate times, the rate
// limit's wait, the best schedule from the DAG with the times the
// stories took; and as a picture: one bar per iteration, coloured by
// outcome with its glyph, its hover text naming the story, attempt,
// role, duration and tokens.
func TestTimeline(t *testing.T) {
	r := fiveRun(t)
	var a timelineAnswer
	if err := json.Unmarshal([]byte(r.get("/api/timeline")), &a); err != nil {
		t.Fatal(err)
	}
	if len(a.Rows) != 2 || a.Slots != 2 || len(a.Bars) != 7 || len(a.Waits) != 1 {
		t.Fatalf("rows %+v, %d bars, waits %+v", a.Rows, len(a.Bars), a.Waits)
	}
	row := map[int]int{}
	for _, b := range a.Bars {
		row[b.Number] = b.Row
	}
	if row[3] != row[4] || row[2] == row[3] || a.Bars[0].Row != 0 {
		t.Errorf("rows by iteration: %v", row)
	}
	c1 := a.Bars[2]
	if c1.Number != 3 || c1.Outcome != "failed" || c1.AgentMS != 5000 || c1.GateMS != 1000 || c1.DurationMS != 6000 || c1.Tokens != 9000 {
		t.Errorf("C's failure: %+v", c1)
	}
	b := a.Bars[1]
	if b.Number != 2 || !b.Queued || !b.SlotEnd.Equal(t0.Add(21*time.Second)) || !b.End.Equal(t0.Add(22*time.Second)) {
		t.Errorf("B in the merge queue: %+v", b)
	}
	if d := a.Bars[4]; d.Outcome != "rate_limited" || !a.Waits[0].Until.Equal(t0.Add(30*time.Second)) {
		t.Errorf("D rate-limited: %+v, %+v", d, a.Waits)
	}
	// Stories' times: A 10, B 11, C 6+8, D 1+10, E (running, at its
	// end of 45 s... counted to now); the critical path A-B-D-E is the
	// longest chain, the bound at least it.
	if a.Best == nil || a.Best.Workers != 2 || a.Best.CriticalPathMS < 32000 || a.Best.BoundMS < a.Best.CriticalPathMS || a.Best.Estimated != 0 {
		t.Errorf("best schedule: %+v", a.Best)
	}

	page := r.get("/")
	svg := regexp.MustCompile(`(?s)<svg id="timeline-svg".*?</svg>`).FindString(page)
	if got := strings.Count(svg, `<g class="bar `); got != 7 {
		t.Errorf("%d bars in the picture, want 7:\n%s", got, svg)
	}
	for _, want := range []string{`<g class="bar failed" data-iteration="3" data-item="C" data-outcome="failed">`, `<g class="bar passed" data-iteration="4"`,
		`<g class="bar ratelimited" data-iteration="5"`, `<g class="bar interrupted" data-iteration="7"`, "C C · iteration 3 · attempt 1/3 · worker (claude)\n✗ failed after 6.0s (agent 5.0s, gates 1.0s)\n9.0k tokens, $0.15",
		"D D · iteration 6 · attempt 1/3 · reviewer (claude)", `class="wait-band"`, `class="gate"`, `class="best"`, `class="queue"`, `fill="url(#hatch)"`, `✗ C`, `✓ A`, `<a href="items/C?repo=0">`} {
		if !strings.Contains(svg, want) {
			t.Errorf("the timeline lacks %q:\n%s", want, svg)
		}
	}
}

// A coordinator's run: a row per slot of each worker machine, named by
// the worker, from the line its transcript names the worker by.
func TestTimelineWorkerMachines(t *testing.T) {
	r := newPRDRun(t, five[:3], map[string]string{"A": "passed", "B": "passed", "C": "passed"})
	tr := func(n int, id, worker string) string {
		return r.transcript(n, id, "## Agent output\n\n[ralph] job j"+id+" taken by worker "+worker+"\nok\n")
	}
	writeEvents(t, r.p,
		ev(0, "iteration_started", 1, "A", 1, map[string]any{"transcript": tr(1, "A", "w-1 on vm-a")}),
		ev(5, "item_passed", 1, "A", 0, nil),
		ev(5, "iteration_started", 2, "B", 1, map[string]any{"transcript": tr(2, "B", "w-1 on vm-a")}),
		ev(5, "iteration_started", 3, "C", 1, map[string]any{"transcript": tr(3, "C", "w-2 on vm-b")}),
		ev(9, "item_passed", 2, "B", 0, nil),
		ev(9, "item_passed", 3, "C", 0, nil))
	r.serve()
	var a timelineAnswer
	json.Unmarshal([]byte(r.get("/api/timeline")), &a)
	var names []string
	for _, row := range a.Rows {
		names = append(names, row.Name+"|"+row.Worker)
	}
	if got := strings.Join(names, ", "); got != "w-1 · 1|w-1 on vm-a, w-2 · 1|w-2 on vm-b" {
		t.Errorf("rows: %s", got)
	}
	if a.Bars[0].Row != 0 || a.Bars[1].Row != 0 || a.Bars[2].Row != 1 {
		t.Errorf("bars: %+v", a.Bars)
	}
}

// The DAG as data and as a picture: a node per story at its level, an
// edge per dependency (dashed while the dependency has not passed).
// With 200 stories each level's passed stories fold into one node and
// only the open dependencies are drawn; ?dag=all shows every story
// again.
func TestDAG(t *testing.T) {
	r := fiveRun(t)
	var a dagAnswer
	json.Unmarshal([]byte(r.get("/api/dag")), &a)
	if a.Stories != 5 || len(a.Levels) != 4 || len(a.Edges) != 5 || a.Nodes[3].ID != "D" || a.Nodes[3].Level != 3 || a.Nodes[4].Status != "running" || a.Nodes[2].Attempts != "2/3" {
		t.Errorf("dag: %+v", a)
	}
	page := r.get("/")
	svg := regexp.MustCompile(`(?s)<svg id="dag-svg".*?</svg>`).FindString(page)
	if n := strings.Count(svg, `<g class="node `); n != 5 {
		t.Errorf("%d nodes, want 5:\n%s", n, svg)
	}
	for _, want := range []string{`data-id="E" data-status="running"`, `<path class="edge" d="M`, `data-from="D" data-to="E"`, "✓ A cart", "▶ E history", "L3 · 1/1 ✓", `<a href="items/D?repo=0">`} {
		if !strings.Contains(svg, want) {
			t.Errorf("the DAG lacks %q:\n%s", want, svg)
		}
	}

	// 200 stories in 20 levels of 10, each after one of the level before;
	// the first 15 levels passed.
	var big []story
	statuses := map[string]string{}
	for i := 0; i < 200; i++ {
		s := story{ID: fmt.Sprintf("S%03d", i), Title: "story"}
		if i >= 10 {
			s.Deps = []string{fmt.Sprintf("S%03d", i-10)}
		}
		if i < 150 {
			statuses[s.ID] = "passed"
		}
		big = append(big, s)
	}
	r2 := newPRDRun(t, big, statuses)
	r2.serve()
	page = r2.get("/")
	svg = regexp.MustCompile(`(?s)<svg id="dag-svg".*?</svg>`).FindString(page)
	if n, folded := strings.Count(svg, `<g class="node `), strings.Count(svg, `class="node folded`); n != 65 || folded != 15 {
		t.Errorf("200 stories: %d nodes (%d folded levels), want 65 (15)", n, folded)
	}
	// Only the dependencies still open are drawn: 4 levels of 10.
	if !strings.Contains(page, `id="dag-folded"`) || !strings.Contains(page, "dag=all") || strings.Count(svg, `<path class="edge open"`) != 40 || strings.Count(svg, "<path") != 40 {
		t.Errorf("the folded DAG: no way to unfold it, or not the 40 open edges (%d edges)", strings.Count(svg, "<path"))
	}
	svg = regexp.MustCompile(`(?s)<svg id="dag-svg".*?</svg>`).FindString(r2.get("/?dag=all"))
	if n := strings.Count(svg, `<g class="node `); n != 200 {
		t.Errorf("?dag=all: %d nodes", n)
	}
	json.Unmarshal([]byte(r2.get("/api/dag")), &a)
	if len(a.Nodes) != 200 || !a.Levels[0].Folded || a.Levels[19].Folded {
		t.Errorf("/api/dag of 200: %d nodes, levels %+v", len(a.Nodes), a.Levels)
	}
}

// Spending over time by agent and by role, the budget as a line, and
// the stories passed against time.
func TestCost(t *testing.T) {
	r := fiveRun(t)
	var a costAnswer
	json.Unmarshal([]byte(r.get("/api/cost")), &a)
	if len(a.Points) != 7 || a.BudgetUSD != 2 || len(a.ByAgent) != 2 || a.ByAgent[0].Name != "claude" || a.ByAgent[1].Name != "codex" || a.ByAgent[1].CostUSD != 0.10 {
		t.Errorf("spending: %+v", a)
	}
	last := a.Points[len(a.Points)-1]
	if last.SumTokens != 55800 || fmt.Sprintf("%.2f", last.SumCost) != "0.92" {
		t.Errorf("totals: %+v", last)
	}
	var roles []string
	for _, s := range a.ByRole {
		roles = append(roles, fmt.Sprintf("%s:%d", s.Name, s.Iterations))
	}
	if strings.Join(roles, " ") != "worker:6 reviewer:1" {
		t.Errorf("by role: %v", roles)
	}
	if len(a.Passes) != 4 || a.Passes[3].Passed != 4 || a.Stories != 5 {
		t.Errorf("passes: %+v", a.Passes)
	}
	page := r.get("/")
	for _, want := range []string{`<line class="budget"`, "budget $2.00", `<polyline class="series total"`, `<polyline class="series s0"`, `<polyline class="series passes"`,
		`<circle class="point pass"`, "C passed at 25s (3 of 5)", `<td>reviewer</td>`, `<td>codex</td>`} {
		if !strings.Contains(page, want) {
			t.Errorf("the charts lack %q", want)
		}
	}
}

// A story's page: the criteria and checks from the PRD; the judge's
// record (evidence, contract, checks), or plainly none; every iteration
// with its verdict, gates, files and gate output; the transcript as
// ralph log renders it; the commit with its files and its page on
// GitHub. Attempts read the same on the page, in the table and in the
// DAG: a story passed at once is 1/3, one passed before the run —.
func TestItemPage(t *testing.T) {
	r := fiveRun(t)
	r.st.Items["C"].Status = engine.ItemPassed
	sha := r.commit("C", true)
	r.commit("B", false)
	r.st.Items["B"].Iterations, r.st.Items["B"].Runs = nil, 0 // passed in an earlier run
	r.serve()
	r.transcript(3, "C", "# ralph iteration 3 · story C · attempt 1/3 · agent claude\n# dir /w\n\n## Prompt\n\nsecret plan\n\n## Agent output\n\nworking on C\n\n=== gate test: go test ./...\n--- FAIL: TestTax (0.00s)\n    tax_test.go:9: got 0, want 7\nFAIL\n=== gate test: FAILED (exit 1, 1s)\n\n[ralph] C not passed: test FAILED\n")

	page := r.get("/items/C")
	for _, want := range []string{`id="no-judgement"`, "No judgement recorded for this story", `<span id="item-status" class="pill passed">✓ passed</span>`,
		`<b id="attempts">2/3</b>`, "<code>test: go test ./...</code> <span class=\"muted\">(every story's gate)</span>", `<a href="A?repo=0">A</a>`,
		`<tr id="iteration-3" class="failed">`, `<tr id="iteration-4" class="passed">`, "--- FAIL: TestTax (0.00s)\n    tax_test.go:9: got 0, want 7\nFAIL",
		"## Prompt (3 lines folded; --raw shows them)", "https://github.com/acme/shop/commit/" + sha, "<code>C.txt</code>", `<span class="add">+2</span>`} {
		if !strings.Contains(page, want) {
			t.Errorf("C's page lacks %q:\n%s", want, page)
		}
	}
	if strings.Contains(page, "secret plan") || strings.Contains(page, "# dir /w") {
		t.Errorf("the prompt is not folded:\n%s", page)
	}

	// The judge's record of C's two claims.
	contract := &judge.Contract{Item: "C", Base: sha, Protected: []string{"tax_test.go"}, RedAtBase: []judge.TestRef{{Gate: "test", Test: "TestTax"}}, GreenAtBase: 12, Gates: []string{"test: go test ./..."}}
	judge.Append(r.p.Dir, judge.Judgement{Item: "C", Iteration: 3, Attempt: 1, Claimed: true, Summary: "test FAILED", Contract: contract,
		Files: []judge.FileStat{{Path: "tax.go", Added: 3, Deleted: 1}}, Lost: []string{"test: TestCart"}})
	judge.Append(r.p.Dir, judge.Judgement{Item: "C", Iteration: 4, Attempt: 2, Claimed: true, Passed: true, Summary: "test passed", Contract: contract,
		Checks:   []judge.CheckResult{{Check: "protected files", OK: true, Detail: "1 unchanged"}, {Check: "evidence", OK: true}},
		Evidence: []judge.Evidence{{Kind: judge.EvidenceFixed, Gate: "test", Test: "TestTax"}, {Kind: judge.EvidenceNewTest, Gate: "test", Test: "TestTaxRounding"}},
		StillRed: []judge.TestRef{{Gate: "lint"}}, Files: []judge.FileStat{{Path: "tax.go", Added: 9, Deleted: 2}}})
	// The lander's record of the commit it landed.
	judge.Append(r.p.Dir, judge.Judgement{Item: "C", Landed: sha, Claimed: true, Passed: true, Summary: "landed"})
	page = r.get("/items/C")
	for _, want := range []string{`id="verdict"`, "✓ passed</span> iteration 4, attempt 2 · test passed · landed as <code>" + engine.ShortSHA(sha) + "</code>", "test: TestTax failed at the base and passes",
		"new test test: TestTaxRounding passes and fails on the base&#39;s code", "Red at the base and still red (not this story's doing): <code>lint</code>",
		`<dl class="kv" id="contract">`, "<b>The judge's checks</b>: 2 of 2 passed", "<code>test: TestTax</code>", "12 test(s), which must all still pass", "1 file(s) the agent may not change", "<code>tax.go</code> <span class=\"add\">+3</span>"} {
		if !strings.Contains(page, want) {
			t.Errorf("C's page with its judgements lacks %q:\n%s", want, page)
		}
	}
	if strings.Contains(page, `id="no-judgement"`) {
		t.Error("C's page says no judgement was recorded")
	}
	var a itemAnswer
	json.Unmarshal([]byte(r.get("/api/items/C")), &a)
	if len(a.Judgements) != 2 || a.Judgements[1].Landed != sha || a.Contract == nil || a.Contract.GreenAtBase != 12 || len(a.Iterations) != 2 || !a.Iterations[0].Judged || a.Iterations[0].Files[0].Path != "tax.go" ||
		a.Iterations[0].GateOutput[0].Result != "FAILED (exit 1, 1s)" || a.Commit == nil || a.Commit.SHA != sha || a.Story == nil || a.Attempts != "2/3" {
		t.Errorf("/api/items/C: %+v", a)
	}
	var tr transcriptAnswer
	json.Unmarshal([]byte(r.get("/api/transcripts/3")), &tr)
	if !strings.Contains(tr.Rendered, "## Prompt (3 lines folded") || !strings.Contains(tr.Text, "secret plan") {
		t.Errorf("/api/transcripts/3: %+v", tr)
	}

	// Attempts agree: A passed at once (1/3), B before the run (—), in
	// the table, the DAG and A's page; B's commit is found by its
	// trailer.
	run := r.get("/")
	for _, want := range []string{`<tr id="item-A" class="passed">`, "<td>1/3</td><td>L1</td><td></td>", "A cart — passed · attempts 1/3", "B prices — passed before this run · attempts —",
		`<td>—</td><td>L2</td><td>A</td><td><code>` + engine.ShortSHA(gitRun(t, r.p.Root, "rev-parse", "HEAD"))} {
		if !strings.Contains(run, want) {
			t.Errorf("the run's page lacks %q", want)
		}
	}
	if !strings.Contains(r.get("/items/A"), `<b id="attempts">1/3</b>`) {
		t.Error("A's page: not attempt 1/3")
	}
}

// Several repositories: / lists each one's run and state, ?repo=N is
// that one's page; the overview updates over the event stream.
func TestOverview(t *testing.T) {
	r := fiveRun(t)
	other := newPRDRun(t, five[:2], map[string]string{"A": "blocked"})
	other.st.RunID, other.st.Status = "r2", engine.StatusBlocked
	b, _ := json.Marshal(other.st)
	os.WriteFile(other.p.State, b, 0o644)
	s := New(r.p, testToken)
	s.Watch(other.p)
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	auth := []string{"Authorization", "Bearer " + testToken}
	_, page := do(t, nil, "GET", srv.URL+"/", nil, auth...)
	for _, want := range []string{`<tr id="repo-0" class="passed">`, `<tr id="repo-1" class="blocked">`, `<a href="?repo=1">` + other.p.Root + `</a>`, "⊘ blocked", "0/2, 1 blocked", "4/5", "$0.92 of a $2.00 budget"} {
		if !strings.Contains(page, want) {
			t.Errorf("the overview lacks %q:\n%s", want, page)
		}
	}
	if _, page := do(t, nil, "GET", srv.URL+"/?repo=1", nil, auth...); !strings.Contains(page, "Run r2") {
		t.Errorf("repo 1's page:\n%s", page)
	}
	if _, body := do(t, nil, "GET", srv.URL+"/events?view=overview&once=1", nil, auth...); !strings.HasPrefix(body, "event: overview\n") || !strings.Contains(body, `id="repo-1"`) {
		t.Errorf("the overview's events:\n%s", body)
	}
}
