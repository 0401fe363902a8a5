package decide

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ralph-loop/ralph/internal/agent"
	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/gate"
	"github.com/ralph-loop/ralph/internal/roles"
)

// fakeView is an iteration as a decider sees it, made by the test: its
// facts and the item's record are set, what the decider does (events,
// progress notes, agent runs) is recorded. Agent runs answer with the
// replies in order.
type fakeView struct {
	facts   engine.Facts
	record  engine.ItemState
	env     roles.Env
	paths   engine.Paths
	commits int
	replies []reply

	events []engine.Event
	notes  []string
	runs   []engine.AgentRun
	logs   []*closingBuffer
}

// reply is how one agent run ends.
type reply struct {
	final  string
	exit   int
	err    error // the agent's own failure
	cancel bool  // the run was interrupted
}

type closingBuffer struct {
	bytes.Buffer
	closed bool
}

func (b *closingBuffer) Close() error { b.closed = true; return nil }

func (v *fakeView) Facts() engine.Facts      { return v.facts }
func (v *fakeView) Record() engine.ItemState { return v.record }
func (v *fakeView) RoleEnv() roles.Env       { return v.env }
func (v *fakeView) Why(t *roles.Trigger) string {
	return fmt.Sprintf("%s (roles.yaml:%d)", t.Condition, t.Line)
}
func (v *fakeView) MaxAttempts() int { return 3 }
func (v *fakeView) ItemDir(kind string) string {
	return filepath.Join(v.paths.Dir, kind, v.facts.Item.ID)
}
func (v *fakeView) Paths() engine.Paths                               { return v.paths }
func (v *fakeView) RunID() string                                     { return "run-1" }
func (v *fakeView) Now() time.Time                                    { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }
func (v *fakeView) Emit(ev engine.Event)                              { v.events = append(v.events, ev) }
func (v *fakeView) Note(entry string)                                 { v.notes = append(v.notes, entry) }
func (v *fakeView) CommitsSince(context.Context, string) (int, error) { return v.commits, nil }

func (v *fakeView) RunAgent(ctx context.Context, r engine.AgentRun) (engine.AgentRan, error) {
	v.runs = append(v.runs, r)
	if len(v.replies) == 0 {
		return engine.AgentRan{}, errors.New("the test has no reply for this run")
	}
	rp := v.replies[0]
	v.replies = v.replies[1:]
	if rp.cancel {
		return engine.AgentRan{}, context.Canceled
	}
	log := &closingBuffer{}
	v.logs = append(v.logs, log)
	return engine.AgentRan{Agent: engine.AgentChoice{Name: "voter", Model: "m1"}, Result: agent.Result{FinalText: rp.final, ExitCode: rp.exit},
		Err: rp.err, Log: log, Transcript: filepath.Join(v.paths.Transcripts, r.Label+".log")}, nil
}

// types lists the events' types.
func types(evs []engine.Event) string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Type)
	}
	return strings.Join(out, " ")
}

// newView is a view of iteration 7, attempt 2, of story S-1 under a fresh
// .ralph.
func newView(t *testing.T) *fakeView {
	p := engine.PathsFor(t.TempDir())
	return &fakeView{paths: p, facts: engine.Facts{Item: &engine.Item{ID: "S-1", Title: "login", Kind: "story"}, Iteration: 7, Attempt: 2}}
}

// loadRoles is the roles in force with roles.yaml as given ("" none).
func loadRoles(t *testing.T, yaml string) *roles.Set {
	t.Helper()
	root := t.TempDir()
	if yaml != "" {
		os.MkdirAll(filepath.Join(root, ".ralph"), 0o755)
		if err := os.WriteFile(filepath.Join(root, ".ralph", "roles.yaml"), []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rs, err := roles.Load(root)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

var (
	passed = engine.Verdict{Passed: true, Claimed: true, Summary: "test passed"}
	failed = engine.Verdict{Claimed: true, Summary: "test FAILED", Gates: []gate.Result{{Name: "lint", Passed: true}, {Name: "test", Passed: false}}}
)

// The plan decider judges a planning iteration: it must have written the
// plan and changed no code. A plan waits for a person (or is approved at
// once with --auto-approve) and spends no attempt.
func TestPlanDecide(t *testing.T) {
	rs := loadRoles(t, "")
	for _, c := range []struct {
		name      string
		auto      bool
		facts     func(*engine.Facts)
		commits   int
		plan      string // the plan file's text ("" none)
		prevRev   int
		action    engine.Action
		summary   string // of a failed verdict, or the decision's status
		result    string // a held item's last result
		failure   string
		record    engine.ItemState
		events    string
		logSuffix string
	}{
		{name: "not a planning iteration", facts: func(f *engine.Facts) { f.Planning = false }, plan: "the plan"},
		{name: "the planner's run failed", facts: func(f *engine.Facts) { f.Result.ExitCode = 2 }, plan: "the plan",
			action: engine.Fail, summary: "agent exited with code 2", failure: "The previous agent run did not finish"},
		{name: "it changed code", facts: func(f *engine.Facts) { f.Files = []string{"main.go", "util.go"} }, plan: "the plan",
			action: engine.Fail, summary: "the planning iteration changed code", failure: "this one changed main.go, util.go. Undo that (git reset --hard abcdef01; git clean -fd)"},
		{name: "it committed", commits: 2, plan: "the plan",
			action: engine.Fail, summary: "the planning iteration changed code", failure: "this one made 2 commits"},
		{name: "no plan", action: engine.Fail, summary: "plan not written", failure: "No plan was written: write the plan to"},
		{name: "a blank plan", plan: " \n\t\n", action: engine.Fail, summary: "plan not written"},
		{name: "a plan, waiting", plan: "1. do it", prevRev: 1,
			action: engine.Hold, summary: "plan written, waiting for approval", result: "plan written; waiting for approval", record: engine.ItemState{PlanRev: 2, Plan: engine.PlanWaiting},
			events: "plan_written", logSuffix: "S-1: plan written, waiting for approval (.ralph/plans/S-1.md)"},
		{name: "a plan, approved at once", auto: true, plan: "1. do it",
			action: engine.Hold, summary: "plan written and approved (--auto-approve)", result: "plan written and approved (--auto-approve)", record: engine.ItemState{PlanRev: 1, Plan: engine.PlanApproved},
			events: "plan_written plan_approved", logSuffix: "S-1: plan written and approved (--auto-approve) (.ralph/plans/S-1.md)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := newView(t)
			v.facts.Planning, v.facts.StartHead, v.commits = true, "abcdef0123456789", c.commits
			v.record.PlanRev = c.prevRev
			if c.facts != nil {
				c.facts(&v.facts)
			}
			file := engine.PlanFile(v.paths, "S-1")
			if c.plan != "" {
				os.MkdirAll(filepath.Dir(file), 0o755)
				os.WriteFile(file, []byte(c.plan), 0o644)
			}
			d, err := plan{On: true, Auto: c.auto, Roles: rs, Paths: v.paths}.Decide(context.Background(), v, passed)
			if err != nil {
				t.Fatal(err)
			}
			if d.Action != c.action {
				t.Fatalf("action %d, want %d: %+v", d.Action, c.action, d)
			}
			switch c.action {
			case engine.Fail:
				if d.Verdict.Passed || d.Verdict.Summary != c.summary || !strings.Contains(d.Verdict.Failure, c.failure) {
					t.Fatalf("verdict %+v", d.Verdict)
				}
			case engine.Hold:
				var is engine.ItemState
				d.Record(&is)
				if d.Status != c.summary || d.Result != c.result || d.Progress != "plan .ralph/plans/S-1.md" || is.PlanRev != c.record.PlanRev || is.Plan != c.record.Plan {
					t.Fatalf("decision %+v, record %+v", d, is)
				}
				if types(d.Events) != c.events || d.Log != c.logSuffix || d.Events[0].Data["rev"] != c.record.PlanRev || d.Events[0].Iteration != 7 {
					t.Fatalf("events %+v, log %q", d.Events, d.Log)
				}
			}
			if len(v.events) != 0 {
				t.Fatalf("emitted %v: a plan's events come with its decision", types(v.events))
			}
		})
	}
}

// The planner claims every iteration of an item until its plan is
// approved; without --plan-approval it claims none.
func TestPlanTurn(t *testing.T) {
	p := plan{On: true, Roles: loadRoles(t, ""), Paths: engine.PathsFor("/repo")}
	it := &engine.Item{ID: "S-1"}
	tn, ok, err := p.Turn(it, engine.ItemState{})
	if err != nil || !ok || tn.Role != "planner" || !tn.Planning || !strings.Contains(tn.Why, "the item's plan comes first") ||
		!strings.Contains(tn.Text, "Write the plan to this file") || tn.Env[0] != "RALPH_PLAN_FILE=/repo/.ralph/plans/S-1.md" {
		t.Fatalf("%+v %v %v", tn, ok, err)
	}
	if tn, _, _ := p.Turn(it, engine.ItemState{PlanRev: 1}); !strings.Contains(tn.Why, "the last plan was rejected") {
		t.Fatalf("after a rejection: %+v", tn)
	}
	if _, ok, _ := p.Turn(it, engine.ItemState{Plan: engine.PlanApproved}); ok {
		t.Fatal("claimed an item whose plan is approved")
	}
	if _, ok, _ := (plan{}).Turn(it, engine.ItemState{}); ok {
		t.Fatal("claimed without --plan-approval")
	}
}

const reviewYAML = `triggers:
  - condition: "task_marked_ready_to_complete && files_changed > 2"
    role: reviewer
  - condition: "attempt > 5"
    role: debugger
`

// The review decider holds a claim that passed its gates when a
// completion trigger names a role: the item waits, no attempt spent, for
// that role's approval. An approval, a source's own role, a failed
// verdict or no trigger that holds has no word.
func TestReviewDecide(t *testing.T) {
	rs := loadRoles(t, reviewYAML)
	for _, c := range []struct {
		name    string
		roles   *roles.Set
		verdict engine.Verdict
		facts   func(*engine.Facts)
		files   int
		hold    bool
	}{
		{name: "a trigger holds", roles: rs, verdict: passed, files: 3, hold: true},
		{name: "no trigger holds", roles: rs, verdict: passed, files: 2},
		{name: "the verdict failed", roles: rs, verdict: failed, files: 3},
		{name: "no completion gates", roles: loadRoles(t, "triggers:\n  - condition: \"files_changed > 2\"\n    role: reviewer\n"), verdict: passed, files: 3},
		{name: "no roles", verdict: passed, files: 3},
		{name: "the role approved", roles: rs, verdict: passed, files: 3, facts: func(f *engine.Facts) { f.RoleVerdict = roles.Approve }},
		{name: "the source's own role", roles: rs, verdict: passed, files: 3, facts: func(f *engine.Facts) { f.Item.Role = "review" }},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := newView(t)
			v.env = roles.Env{FilesChanged: c.files, Attempt: 1}
			if c.facts != nil {
				c.facts(&v.facts)
			}
			d, err := review{Roles: c.roles}.Decide(context.Background(), v, c.verdict)
			if err != nil {
				t.Fatal(err)
			}
			if !c.hold {
				if d.Action != 0 {
					t.Fatalf("a word: %+v", d)
				}
				return
			}
			var is engine.ItemState
			d.Record(&is)
			why := "task_marked_ready_to_complete && files_changed > 2 (roles.yaml:2)"
			if d.Action != engine.Hold || d.Status != "ready for review" || is.Review != "reviewer" || is.ReviewWhy != why ||
				d.Result != "test passed; waiting for the reviewer's approval" || d.Progress != "test passed; the reviewer must approve" {
				t.Fatalf("decision %+v, record %+v", d, is)
			}
			if types(d.Events) != "review_requested" || d.Events[0].Data["role"] != "reviewer" || !strings.Contains(d.Log, "the reviewer must approve ("+why+")") {
				t.Fatalf("events %+v, log %q", d.Events, d.Log)
			}
		})
	}
}

// The review decider claims the review a held item waits for, and the
// worker iteration after a review asked for changes.
// A story whose evidence a person said is a role's review: a claim that
// lacks only evidence is held for that role; other failures, the role's
// own iteration and a role that is not in force are not.
func TestReviewEvidenceDecide(t *testing.T) {
	rs := loadRoles(t, reviewYAML)
	unproven := engine.Verdict{Claimed: true, Unproven: true, Summary: "no evidence: nothing that failed at the base passes now"}
	for _, c := range []struct {
		name    string
		verdict engine.Verdict
		review  string
		role    string
		hold    bool
		err     string
	}{
		{name: "held for the story's reviewer", verdict: unproven, review: "reviewer", hold: true},
		{name: "a story without review", verdict: unproven},
		{name: "another failure", verdict: failed, review: "reviewer"},
		{name: "the reviewer's own iteration", verdict: unproven, review: "reviewer", role: "reviewer"},
		{name: "a role not in force", verdict: unproven, review: "nosuch", err: "no role nosuch is in force"},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := newView(t)
			v.facts.Item.Review = c.review
			v.record.Role = c.role
			d, err := review{Roles: rs}.Decide(context.Background(), v, c.verdict)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !c.hold {
				if d.Action != 0 {
					t.Fatalf("a word: %+v", d)
				}
				return
			}
			var is engine.ItemState
			d.Record(&is)
			if d.Action != engine.Hold || is.Review != "reviewer" || !strings.Contains(is.ReviewWhy, "its evidence is the reviewer's approval") ||
				types(d.Events) != "review_requested" {
				t.Fatalf("decision %+v, record %+v", d, is)
			}
		})
	}
}

func TestReviewTurn(t *testing.T) {
	r := review{}
	it := &engine.Item{ID: "S-1"}
	if tn, ok, _ := r.Turn(it, engine.ItemState{Review: "reviewer", ReviewWhy: "files_changed > 2"}); !ok || tn.Role != "reviewer" || tn.Why != "awaiting review: files_changed > 2" {
		t.Fatalf("held: %+v %v", tn, ok)
	}
	if tn, ok, _ := r.Turn(it, engine.ItemState{Revise: true}); !ok || tn.Role != "" || !strings.Contains(tn.Why, "asked for changes") {
		t.Fatalf("after changes asked: %+v %v", tn, ok)
	}
	if _, ok, _ := r.Turn(it, engine.ItemState{}); ok {
		t.Fatal("claimed an item nobody holds")
	}
}

// The council votes on a passing claim of an item that needs one (its
// critical field, or a council rule): each member an agent run of its
// own, its vote saved before the next starts; a majority of approvals
// lets the claim go on, anything less fails it with the members' reasons.
func TestCouncilDecide(t *testing.T) {
	rule := loadRoles(t, "council:\n  - condition: \"task_title contains 'auth'\"\n")
	approve := reply{final: "fine\nVOTE: approve"}
	reject := reply{final: "```json\n{\"vote\": \"reject\", \"reasons\": \"no tests for logout\"}\n```"}
	for _, c := range []struct {
		name     string
		critical bool
		title    string
		verdict  engine.Verdict
		replies  []reply
		votes    string // each member's vote, in order ("" no council)
		fail     string // the failed verdict's summary ("" the claim goes on)
		findings []string
	}{
		{name: "not critical", title: "login", verdict: passed},
		{name: "a failed claim", critical: true, title: "login", verdict: failed},
		{name: "critical, a majority", critical: true, title: "login", verdict: passed, replies: []reply{approve, reject, approve}, votes: "approve reject approve"},
		{name: "a council rule, a majority", title: "auth tokens", verdict: passed, replies: []reply{approve, approve, approve}, votes: "approve approve approve"},
		{name: "critical, no majority", critical: true, title: "login", verdict: passed,
			replies: []reply{approve, reject, {final: "I think it is fine"}}, votes: "approve reject abstain",
			fail:     "the council did not approve it (1 approve, 1 reject, 1 abstain of 3)",
			findings: []string{"Member 2 rejected it:\nno tests for logout", "Member 3 abstained (no vote could be read: its final message has no vote"}},
		{name: "members whose runs failed abstain", critical: true, title: "login", verdict: passed,
			replies: []reply{approve, {exit: 3}, {err: errors.New("no such binary")}}, votes: "approve abstain abstain",
			fail:     "the council did not approve it (1 approve, 0 reject, 2 abstain of 3)",
			findings: []string{"Member 2 abstained (no vote could be read: agent exited with code 3)", "Member 3 abstained (no vote could be read: agent voter: no such binary)"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := newView(t)
			v.facts.Item.Critical, v.facts.Item.Title = c.critical, c.title
			v.env = roles.Env{TaskTitle: c.title}
			v.record.BaseHead = "0123456789abcdef"
			v.replies = c.replies
			d, err := council{Members: 3, Roles: rule}.Decide(context.Background(), v, c.verdict)
			if err != nil {
				t.Fatal(err)
			}
			if c.votes == "" {
				if d.Action != 0 || len(v.runs) != 0 || len(v.events) != 0 {
					t.Fatalf("a council ran: %+v, %d runs", d, len(v.runs))
				}
				return
			}
			var votes []string
			for m := 1; m <= 3; m++ {
				var rec voteRecord
				b, err := os.ReadFile(filepath.Join(v.paths.Dir, "council", "S-1", fmt.Sprintf("0007-%d.json", m)))
				if err != nil {
					t.Fatal(err)
				}
				if err := json.Unmarshal(b, &rec); err != nil {
					t.Fatal(err)
				}
				if rec.Item != "S-1" || rec.Iteration != 7 || rec.Member != m || rec.Of != 3 || rec.Agent != "voter" || rec.Model != "m1" || !strings.HasSuffix(rec.Transcript, fmt.Sprintf("council-%d.log", m)) {
					t.Fatalf("vote %d: %+v", m, rec)
				}
				votes = append(votes, rec.Vote)
				r := v.runs[m-1]
				if r.Role != "council" || r.Label != fmt.Sprintf("council-%d", m) || r.Run != m || r.Env[0] != fmt.Sprintf("RALPH_COUNCIL_MEMBER=%d", m) ||
					!strings.Contains(r.Prompt, fmt.Sprintf("You are council member %d of 3.", m)) || !strings.Contains(r.Prompt, "git diff 01234567") || !strings.Contains(r.Prompt, "test passed") {
					t.Fatalf("run %d: %+v", m, r)
				}
				if log := v.logs[m-1]; !log.closed || !strings.Contains(log.String(), fmt.Sprintf("council member %d/3 votes %s", m, rec.Vote)) {
					t.Fatalf("member %d's transcript: %q", m, v.logs[m-1].String())
				}
			}
			if strings.Join(votes, " ") != c.votes {
				t.Fatalf("votes %v", votes)
			}
			if types(v.events) != "council_started council_vote council_vote council_vote council_decided" || len(v.notes) != 1 || !strings.Contains(v.notes[0], "Council (") {
				t.Fatalf("events %s, notes %q", types(v.events), v.notes)
			}
			if c.fail == "" {
				if d.Action != 0 || !strings.Contains(v.notes[0], "Decision: approved") {
					t.Fatalf("a word on an approved claim: %+v", d)
				}
				return
			}
			if d.Action != engine.Fail || d.Verdict.Passed || d.Verdict.Summary != c.fail || d.Status != "rejected by the council" || !strings.Contains(v.notes[0], "Decision: rejected") {
				t.Fatalf("decision %+v", d)
			}
			for _, f := range c.findings {
				if !strings.Contains(d.Findings, f) || !strings.Contains(d.Verdict.Failure, f) {
					t.Errorf("findings lack %q:\n%s", f, d.Findings)
				}
			}
		})
	}
	t.Run("interrupted", func(t *testing.T) {
		v := newView(t)
		v.facts.Item.Critical = true
		v.replies = []reply{approve, {cancel: true}}
		if _, err := (council{Members: 3, Roles: rule}).Decide(context.Background(), v, passed); !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v", err)
		}
		if len(v.runs) != 2 {
			t.Fatalf("%d runs after the interruption", len(v.runs))
		}
	})
}

// The test-fix decider re-runs a claim whose test gate failed, up to Max
// times within the attempt, when the claim itself stood.
func TestTestFixDecide(t *testing.T) {
	lintFailed := engine.Verdict{Claimed: true, Summary: "lint FAILED", Gates: []gate.Result{{Name: "lint", Passed: false}}}
	for _, c := range []struct {
		name    string
		max     int
		fixes   int
		verdict engine.Verdict
		facts   func(*engine.Facts)
		rerun   int // the re-run asked for (0 none)
	}{
		{name: "the test gate failed", max: 2, verdict: failed, rerun: 1},
		{name: "the second re-run", max: 2, fixes: 1, verdict: failed, rerun: 2},
		{name: "re-runs spent", max: 2, fixes: 2, verdict: failed},
		{name: "off", verdict: failed},
		{name: "passed", max: 2, verdict: passed},
		{name: "another gate failed", max: 2, verdict: lintFailed},
		{name: "no claim", max: 2, verdict: engine.Verdict{Summary: "no claim", Gates: failed.Gates}},
		{name: "a review's rejection", max: 2, verdict: failed, facts: func(f *engine.Facts) { f.Rejected = "no" }},
		{name: "the agent's run failed", max: 2, verdict: failed, facts: func(f *engine.Facts) { f.Result.TimedOut = true }},
		{name: "tampering", max: 2, verdict: engine.Verdict{Claimed: true, Gates: failed.Gates, Tampered: []string{"the agent edited the gates"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := newView(t)
			v.record.Fixes = c.fixes
			if c.facts != nil {
				c.facts(&v.facts)
			}
			d, err := testFix{Max: c.max, Role: "debugger"}.Decide(context.Background(), v, c.verdict)
			if err != nil {
				t.Fatal(err)
			}
			if c.rerun == 0 {
				if d.Action != 0 {
					t.Fatalf("a word: %+v", d)
				}
				return
			}
			var is engine.ItemState
			d.Record(&is)
			if d.Action != engine.Rerun || is.Fixes != c.rerun || is.Fix != "debugger" ||
				d.Status != fmt.Sprintf("test failed; test-fix re-run %d/2 follows", c.rerun) || d.Result != fmt.Sprintf("test gate failed; test-fix re-run %d/2 follows: test FAILED", c.rerun) {
				t.Fatalf("decision %+v, record %+v", d, is)
			}
			if types(d.Events) != "test_fix" || !strings.Contains(d.Events[0].Message, fmt.Sprintf("re-running the agent as debugger with the failing output (test-fix re-run %d/2 within attempt 2/3)", c.rerun)) {
				t.Fatalf("events %+v", d.Events)
			}
		})
	}
}

// The test-fix decider claims the re-run an item waits for.
func TestTestFixTurn(t *testing.T) {
	f := testFix{Max: 2, Role: "debugger"}
	if tn, ok, _ := f.Turn(&engine.Item{ID: "S-1"}, engine.ItemState{Fix: "debugger", Fixes: 1}); !ok || tn.Role != "debugger" || tn.Why != "test-fix re-run 1/2: the test gate failed (--test-fix)" {
		t.Fatalf("%+v %v", tn, ok)
	}
	if _, ok, _ := f.Turn(&engine.Item{ID: "S-1"}, engine.ItemState{}); ok {
		t.Fatal("claimed an item that waits for no re-run")
	}
}

// Rules are the deciders in the order the engine asks them, with their
// defaults; a --test-fix role that is not in force is the user's error.
func TestRules(t *testing.T) {
	rs := loadRoles(t, "")
	ds, err := Rules(Options{Roles: rs, TestFix: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 5 || ds[3].(council).Members != 3 || ds[4].(testFix).Role != "debugger" {
		t.Fatalf("rules %+v", ds)
	}
	if _, ok := ds[0].(ask); !ok {
		t.Fatalf("the question decider is not first: %T", ds[0])
	}
	if _, ok := ds[1].(plan); !ok {
		t.Fatalf("the plan decider is not second: %T", ds[1])
	}
	if _, err := Rules(Options{Roles: rs, TestFix: 1, TestFixRole: "fixer"}); err == nil || !strings.Contains(err.Error(), "no role fixer is in force") {
		t.Fatalf("err %v", err)
	}
}
