package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ralph-loop/ralph/internal/agent"
	"github.com/ralph-loop/ralph/internal/judge"
	"github.com/ralph-loop/ralph/internal/land"
	"github.com/ralph-loop/ralph/internal/land/landtest"
)

// fakeSource is a Source whose claims and recovery are scripted per
// item, and which records every call the engine makes. Its items land on
// the branch ralph/x (Terms); the fake judge judges them.
type fakeSource struct {
	items   []Item
	recover map[string]string // item → commit that landed
	// terms, when set, adds to an item's terms (a KeepWork message, a
	// refusal).
	terms func(it *Item, c *judge.Claim)
	// follow, when set, is the workspace's Follow.
	follow func(ctx context.Context, v Verdict, old, landed string) error

	mu        sync.Mutex
	calls     []string
	landed    map[string]string // item → the commit Landed was told
	blocked   map[string]string
	notPassed []string
	conflicts []string
	closed    *State
}

func (s *fakeSource) log(format string) {
	s.mu.Lock()
	s.calls = append(s.calls, format)
	s.mu.Unlock()
}

func (s *fakeSource) Info() SourceInfo {
	return SourceInfo{Kind: "prd", Path: "/src/prd.json", ItemKind: "story", PRDPath: "/src/prd.json"}
}
func (s *fakeSource) Items() []Item { return s.items }
func (s *fakeSource) Next(st *State, busy map[string]bool) (*Item, error) {
	for _, it := range s.items {
		is := st.Items[it.ID]
		if is != nil && (is.Status == ItemPassed || is.Status == ItemBlocked) || busy[it.ID] {
			continue
		}
		it := it
		return &it, nil
	}
	return nil, nil
}
func (s *fakeSource) Prepare(_ context.Context, it *Item, _ *State) (Workspace, error) {
	s.log("prepare " + it.ID)
	return Workspace{Dir: "/work", Base: "base-" + it.ID, Follow: s.follow}, nil
}
func (s *fakeSource) Terms(it *Item, st *State) judge.Claim {
	c := judge.Claim{Target: "ralph/x", Subject: "feat(" + it.ID + "): " + it.Title}
	if s.terms != nil {
		s.terms(it, &c)
	}
	return c
}
func (s *fakeSource) Claim(_ context.Context, a *Attempt, st *State) judge.Claim {
	s.log("claim " + a.Item.ID)
	return s.Terms(a.Item, st)
}
func (s *fakeSource) Landed(_ context.Context, a *Attempt, _ Verdict, commit string, _ *State) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.landed == nil {
		s.landed = map[string]string{}
	}
	s.landed[a.Item.ID] = commit
	s.calls = append(s.calls, "landed "+a.Item.ID)
	return nil
}
func (s *fakeSource) NotPassed(_ context.Context, a *Attempt, v Verdict) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.notPassed = append(s.notPassed, a.Item.ID+": "+v.Summary)
}
func (s *fakeSource) Conflict(_ context.Context, it *Item, paths []string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conflicts = append(s.conflicts, it.ID)
	return "both sides changed " + strings.Join(paths, ", "), nil
}
func (s *fakeSource) Block(_ context.Context, it *Item, _ *State, reason string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.blocked == nil {
		s.blocked = map[string]string{}
	}
	s.blocked[it.ID] = reason
	return nil
}
func (s *fakeSource) Recover(_ context.Context, it *Item, _ *State) (string, bool, error) {
	s.log("recover " + it.ID)
	c, ok := s.recover[it.ID]
	return c, ok, nil
}
func (s *fakeSource) Sync(*State, SyncReason) error { return nil }
func (s *fakeSource) Close(st *State) error         { s.closed = st; return nil }

// funcAgent answers each request with reply and records the requests.
type funcAgent struct {
	reply func(req agent.Request) agent.Result
	mu    sync.Mutex
	reqs  []agent.Request
}

func (a *funcAgent) Name() string                                 { return "func" }
func (a *funcAgent) Plan(agent.Request) (agent.Invocation, error) { return agent.Invocation{}, nil }
func (a *funcAgent) Run(_ context.Context, req agent.Request) (agent.Result, error) {
	a.mu.Lock()
	a.reqs = append(a.reqs, req)
	a.mu.Unlock()
	if a.reply != nil {
		return a.reply(req), nil
	}
	return agent.Result{FinalText: "done\n<promise>COMPLETE</promise>"}, nil
}

func promising(agent.Request) agent.Result {
	return agent.Result{FinalText: "## Learnings\n- tests live in t/\n\n<promise>COMPLETE</promise>"}
}

func oneStory() []Item {
	return []Item{{ID: "S-1", Title: "first", Kind: "story", Criteria: []string{"it works"}, Branch: "ralph/x"}}
}

func newTestEngine(t *testing.T, src Source, ag agent.Agent, mod func(*Config)) (*Engine, Paths) {
	t.Helper()
	p := PathsFor(t.TempDir())
	cfg := Config{Paths: p, Source: src, Git: fakeVCS{}, Clock: &fakeClock{}, Judge: newFakeJudge(), Agent: AgentConfig{Default: ag, Name: "func", Env: []string{"EXTRA=1"}}}
	if mod != nil {
		mod(&cfg)
	}
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e, p
}

// judgeOf is the engine's fake judge.
func judgeOf(e *Engine) *fakeJudge { return e.cfg.Judge.(*fakeJudge) }

// events collects a run's events (Config.OnEvent).
type events struct {
	mu  sync.Mutex
	all []Event
}

func (ev *events) add(e Event) {
	ev.mu.Lock()
	ev.all = append(ev.all, e)
	ev.mu.Unlock()
}

// of are the messages of the events of type typ.
func (ev *events) of(typ string) []string {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	var out []string
	for _, e := range ev.all {
		if e.Type == typ {
			out = append(out, e.Message)
		}
	}
	return out
}

func envOf(req agent.Request) map[string]string {
	m := map[string]string{}
	for _, kv := range req.Env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}

// One passing iteration: prompt, environment, transcript, state, progress;
// its work lands on the branch as a commit of exactly the judged tree, the
// checkout follows, and the source and the judge are told the commit.
func TestIterationPassesAndRecordsEverything(t *testing.T) {
	var followed []string
	src := &fakeSource{items: oneStory(), follow: func(_ context.Context, v Verdict, old, landed string) error {
		followed = append(followed, v.Tree, old, landed)
		return nil
	}}
	ag := &funcAgent{reply: promising}
	e, p := newTestEngine(t, src, ag, func(c *Config) { c.Limits.MaxIterations = 4; c.Limits.MaxAttempts = 2 })
	j := judgeOf(e)
	out, err := e.Run(context.Background())
	if err != nil || out.Status != StatusComplete {
		t.Fatalf("%v %s: %s", err, out.Status, out.Reason)
	}
	if len(ag.reqs) != 1 {
		t.Fatalf("agent ran %d times", len(ag.reqs))
	}
	req := ag.reqs[0]
	for _, want := range []string{"## Your story: S-1 — first", "- it works", "Iteration 1 of at most 4; attempt 1 of 2 on this story.", "/src/prd.json"} {
		if !strings.Contains(req.Prompt, want) {
			t.Errorf("prompt lacks %q:\n%s", want, req.Prompt)
		}
	}
	env := envOf(req)
	for k, v := range map[string]string{"EXTRA": "1", "RALPH_STORY_ID": "S-1", "RALPH_ITEM_ID": "S-1", "RALPH_ITERATION": "1", "RALPH_ATTEMPT": "1", "RALPH_WORK_DIR": "/work", "RALPH_PROMPT_FILE": p.PromptFile, "RALPH_STATE_DIR": p.Dir} {
		if env[k] != v {
			t.Errorf("env %s = %q, want %q", k, env[k], v)
		}
	}
	if env["RALPH_RUN_ID"] != out.State.RunID {
		t.Errorf("RALPH_RUN_ID %q, run %q", env["RALPH_RUN_ID"], out.State.RunID)
	}
	if b, _ := os.ReadFile(p.PromptFile); string(b) != req.Prompt {
		t.Error("the prompt file does not hold the prompt")
	}
	sha := j.git.Tip("ralph/x")
	landed := j.git.Commit(sha)
	if landed.Tree != "tree-S-1-1" || len(landed.Parents) != 1 || landed.Parents[0] != "root" || !strings.HasPrefix(landed.Msg, "feat(S-1): first\n") {
		t.Fatalf("the branch is at %s: %+v", sha, landed)
	}
	is := out.State.Items["S-1"]
	if is.Status != ItemPassed || is.Commit != sha || is.BaseHead != "" || len(out.State.Current) != 0 {
		t.Fatalf("state %+v current %v", is, out.State.Current)
	}
	if src.landed["S-1"] != sha || j.landed["S-1"] != sha {
		t.Fatalf("told the commit: source %q, judge %q; want %s", src.landed["S-1"], j.landed["S-1"], sha)
	}
	if got := strings.Join(followed, " "); got != "tree-S-1-1 root "+sha {
		t.Fatalf("the checkout followed %q", got)
	}
	if got := j.callLog(); got != "begin S-1, judge S-1, landed S-1" {
		t.Fatalf("judge calls: %s", got)
	}
	tr, _ := os.ReadFile(filepath.Join(p.Transcripts, "0001-S-1.log"))
	if !strings.Contains(string(tr), "S-1 passed: gates ok; commit "+ShortSHA(sha)) {
		t.Errorf("transcript:\n%s", tr)
	}
	prog, _ := os.ReadFile(p.Progress)
	if !strings.Contains(string(prog), "tests live in t/") || !strings.Contains(string(prog), "- Commit: "+ShortSHA(sha)) {
		t.Errorf("progress:\n%s", prog)
	}
	if src.closed == nil || src.closed.Status != StatusComplete {
		t.Error("Close was not told the final state")
	}
}

// failing is a script whose every verdict is a failed claim.
func failing(summary, failure string) func(*judge.Case, int) (Verdict, bool) {
	return func(*judge.Case, int) (Verdict, bool) {
		return Verdict{Claimed: true, Summary: summary, Failure: failure}, true
	}
}

// A failed verdict spends an attempt, becomes the next prompt's retry
// context, and blocks the item after its attempts (the source's Block is
// told why); nothing lands.
func TestConcludeRetriesThenBlocks(t *testing.T) {
	src := &fakeSource{items: oneStory()}
	ag := &funcAgent{reply: promising}
	e, _ := newTestEngine(t, src, ag, func(c *Config) { c.Limits.MaxAttempts = 2 })
	j := judgeOf(e)
	j.verdict = failing("test FAILED", "TestAdd: want 3, got 4")
	out, err := e.Run(context.Background())
	if err != nil || out.Status != StatusBlocked {
		t.Fatalf("%v %s", err, out.Status)
	}
	if len(ag.reqs) != 2 {
		t.Fatalf("agent ran %d times, want 2", len(ag.reqs))
	}
	if strings.Contains(ag.reqs[0].Prompt, "Previous attempt failed") || !strings.Contains(ag.reqs[1].Prompt, "TestAdd: want 3, got 4") {
		t.Errorf("retry context missing or early:\n%s", ag.reqs[1].Prompt)
	}
	if envOf(ag.reqs[1])["RALPH_ATTEMPT"] != "2" {
		t.Errorf("second attempt env %v", envOf(ag.reqs[1]))
	}
	is := out.State.Items["S-1"]
	if is.Status != ItemBlocked || is.Attempts != 2 || !strings.Contains(src.blocked["S-1"], "failed 2 attempts; last: test FAILED") {
		t.Fatalf("state %+v, block reason %q", is, src.blocked["S-1"])
	}
	if out.Reason != "no story can start: 0 passed, 1 blocked, 0 waiting on blocked dependencies" {
		t.Errorf("reason %q", out.Reason)
	}
	if out.State.Breaker.SameCount != 2 || out.State.Breaker.NoProgress != 2 {
		t.Errorf("breaker %+v", out.State.Breaker)
	}
	if len(src.notPassed) != 2 || j.git.Tip("ralph/x") != "root" {
		t.Errorf("told not passed %q; the branch is at %s", src.notPassed, j.git.Tip("ralph/x"))
	}
}

// An item's own attempt cap wins over the run's.
func TestItemAttemptCap(t *testing.T) {
	items := oneStory()
	items[0].MaxAttempts = 1
	src := &fakeSource{items: items}
	e, _ := newTestEngine(t, src, &funcAgent{}, func(c *Config) { c.Limits.MaxAttempts = 5 })
	judgeOf(e).verdict = func(*judge.Case, int) (Verdict, bool) { return Verdict{Summary: "no"}, true }
	out, _ := e.Run(context.Background())
	if out.State.Items["S-1"].Attempts != 1 || out.Status != StatusBlocked {
		t.Fatalf("%s %+v", out.Status, out.State.Items["S-1"])
	}
}

// personCommitsOnce moves branch under the lander at its first landing,
// as a person's commit would: the lander's compare-and-swap fails, and
// the plan is stale.
func personCommitsOnce(g *landtest.Git, branch string) (person func() string) {
	var once sync.Once
	var sha string
	g.OnUpdate = func(g *landtest.Git, ref string) {
		if ref == "refs/heads/"+branch {
			once.Do(func() { sha = g.Push(branch, "tree-person", "a person's commit") })
		}
	}
	return func() string { return sha }
}

// staleRun is a run of one story whose first landing a person's commit
// makes stale.
type staleRun struct {
	src    *fakeSource
	ag     *funcAgent
	ev     *events
	e      *Engine
	j      *fakeJudge
	person func() string // the person's commit
}

func newStaleRun(t *testing.T, mod func(*Config)) *staleRun {
	r := &staleRun{src: &fakeSource{items: oneStory()}, ag: &funcAgent{reply: promising}, ev: &events{}}
	r.e, _ = newTestEngine(t, r.src, r.ag, func(c *Config) {
		c.OnEvent = r.ev.add
		if mod != nil {
			mod(c)
		}
	})
	r.j = judgeOf(r.e)
	r.person = personCommitsOnce(r.j.git, "ralph/x")
	return r
}

// A landing that went stale (a person committed on the branch while the
// work was judged) is judged again on the branch as it is, and lands on
// top of the person's commit: nothing of theirs is lost, the agent does
// not run again, and no attempt is spent.
func TestStaleLandingIsJudgedAgainAndLands(t *testing.T) {
	r := newStaleRun(t, nil)
	j, ag, person := r.j, r.ag, r.person
	out, err := r.e.Run(context.Background())
	if err != nil || out.Status != StatusComplete {
		t.Fatalf("%v %s: %s", err, out.Status, out.Reason)
	}
	if got := j.callLog(); got != "begin S-1, judge S-1, rejudge S-1, landed S-1" {
		t.Fatalf("judge calls: %s", got)
	}
	sha := j.git.Tip("ralph/x")
	c := j.git.Commit(sha)
	if person() == "" || c.Tree != "tree-S-1-2" || len(c.Parents) != 1 || c.Parents[0] != person() {
		t.Fatalf("landed %s %+v, the person's commit %s", sha, c, person())
	}
	is := out.State.Items["S-1"]
	if is.Commit != sha || is.Attempts != 0 || len(ag.reqs) != 1 {
		t.Fatalf("state %+v, agent ran %d times", is, len(ag.reqs))
	}
	if len(r.ev.of("merge_stale")) != 1 {
		t.Fatalf("merge_stale events %q", r.ev.of("merge_stale"))
	}
}

// A stale landing whose new judgement fails is a failed attempt, its
// findings the next prompt's context; the next attempt lands.
func TestStaleLandingThatFailsSpendsAnAttempt(t *testing.T) {
	r := newStaleRun(t, nil)
	j, ag, person := r.j, r.ag, r.person
	j.verdict = func(c *judge.Case, n int) (Verdict, bool) {
		if n == 2 {
			return Verdict{Claimed: true, Summary: "integrated gates failed", Failure: "merge broke test"}, true
		}
		return Verdict{}, false
	}
	out, _ := r.e.Run(context.Background())
	is := out.State.Items["S-1"]
	if out.Status != StatusComplete || is.Commit != j.git.Tip("ralph/x") || is.Attempts != 1 {
		t.Fatalf("%s %+v", out.Status, is)
	}
	if c := j.git.Commit(is.Commit); c.Tree != "tree-S-1-3" || c.Parents[0] != person() {
		t.Fatalf("landed %+v", c)
	}
	if len(ag.reqs) != 2 || !strings.Contains(ag.reqs[1].Prompt, "merge broke test") {
		t.Error("the failed judgement is not the retry context")
	}
	if got := r.ev.of("merge_rejected"); len(got) != 1 || !strings.Contains(got[0], "integrated gates failed") {
		t.Fatalf("merge_rejected %q", got)
	}
}

// conflicting is a script whose judgings listed in at answer a conflict
// in f.txt.
func conflicting(at ...int) func(*judge.Case, int) (Verdict, bool) {
	return func(c *judge.Case, n int) (Verdict, bool) {
		if slices.Contains(at, n) {
			return Verdict{Claimed: true, Summary: "merge conflict with ralph/x in f.txt", Conflict: &judge.Conflict{Paths: []string{"f.txt"}}}, true
		}
		return Verdict{}, false
	}
}

// A conflict runs a resolver with the same environment as every agent,
// its own prompt in the prompt file; its work is judged and lands.
func TestConflictRunsResolverWithFullEnv(t *testing.T) {
	src := &fakeSource{items: oneStory()}
	var resolverPromptFile string
	ag := &funcAgent{}
	ag.reply = func(req agent.Request) agent.Result {
		if req.Role == "resolver" {
			b, _ := os.ReadFile(req.PromptFile)
			resolverPromptFile = string(b)
		}
		return promising(req)
	}
	e, p := newTestEngine(t, src, ag, nil)
	j := judgeOf(e)
	j.verdict = conflicting(1)
	out, _ := e.Run(context.Background())
	if out.Status != StatusComplete || out.State.Items["S-1"].Commit != j.git.Tip("ralph/x") || j.git.Commit(j.git.Tip("ralph/x")).Tree != "tree-S-1-2" {
		t.Fatalf("%s %+v", out.Status, out.State.Items["S-1"])
	}
	if len(ag.reqs) != 2 || ag.reqs[1].Role != "resolver" || ag.reqs[1].ItemID != "S-1#resolve" {
		t.Fatalf("requests %+v", ag.reqs)
	}
	env := envOf(ag.reqs[1])
	for k, v := range map[string]string{"RALPH_ROLE": "resolver", "RALPH_STORY_ID": "S-1", "RALPH_ITERATION": "1", "RALPH_WORK_DIR": "/work", "RALPH_PROMPT_FILE": p.PromptFile, "EXTRA": "1", "RALPH_RUN_ID": out.State.RunID} {
		if env[k] != v {
			t.Errorf("resolver env %s = %q, want %q", k, env[k], v)
		}
	}
	if !strings.Contains(resolverPromptFile, "both sides changed f.txt") {
		t.Errorf("the resolver's prompt file holds %q", resolverPromptFile)
	}
	if got := strings.Join(src.conflicts, " "); got != "S-1" {
		t.Errorf("Conflict asked for %q", got)
	}
}

// A landing that went stale and then conflicts on the branch as it is
// runs the resolver too, once; a second conflict fails the attempt.
func TestStaleLandingThatConflictsRunsResolver(t *testing.T) {
	t.Run("resolved", func(t *testing.T) {
		r := newStaleRun(t, nil)
		j, ag := r.j, r.ag
		j.verdict = conflicting(2)
		out, _ := r.e.Run(context.Background())
		is := out.State.Items["S-1"]
		if out.Status != StatusComplete || is.Attempts != 0 || is.Commit != j.git.Tip("ralph/x") || j.git.Commit(is.Commit).Parents[0] != r.person() {
			t.Fatalf("%s %+v", out.Status, is)
		}
		if got := j.callLog(); got != "begin S-1, judge S-1, rejudge S-1, judge S-1, landed S-1" {
			t.Fatalf("judge calls: %s", got)
		}
		if len(ag.reqs) != 2 || ag.reqs[1].Role != "resolver" {
			t.Fatalf("requests %+v", ag.reqs)
		}
	})
	t.Run("the resolver's work conflicts too", func(t *testing.T) {
		r := newStaleRun(t, func(c *Config) { c.Limits.MaxAttempts = 1 })
		r.j.verdict = conflicting(2, 3)
		out, _ := r.e.Run(context.Background())
		is := out.State.Items["S-1"]
		if out.Status != StatusBlocked || is.Attempts != 1 || !strings.Contains(is.LastResult, "conflict resolution failed: merge conflict") {
			t.Fatalf("%s %+v", out.Status, is)
		}
		if len(r.ag.reqs) != 2 {
			t.Fatalf("agents ran %d times, want the worker and one resolver", len(r.ag.reqs))
		}
	})
}

// holdOnce holds an item's first verdict that passed, as a review
// decider does, and says nothing after.
type holdOnce struct {
	mu      sync.Mutex
	held    *land.Ticket
	lander  *land.Lander
	decided []string // what it saw: "hold", or "ahead N" of the next ticket
}

func (h *holdOnce) Turn(*Item, ItemState) (Turn, bool, error) { return Turn{}, false, nil }

func (h *holdOnce) Decide(_ context.Context, x View, v Verdict) (Decision, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !v.Passed {
		return Decision{}, nil
	}
	if h.held == nil {
		h.held, h.lander = v.Ticket, x.(*Iteration).judged.Lander
		h.decided = append(h.decided, "hold")
		return Decision{Action: Hold, Status: "held", Result: "held for a word"}, nil
	}
	ahead := h.lander.Ahead(v.Ticket)
	h.decided = append(h.decided, fmt.Sprintf("ahead %d", ahead))
	if ahead > 0 {
		// Built on the held work, it would wait for it forever.
		return Decision{}, fmt.Errorf("%d plans queued ahead of the item's new verdict", ahead)
	}
	return Decision{}, nil
}

// A decider that holds a verdict that passed takes its work out of the
// queue: nothing lands, the plans judged after it are not built on it,
// and the item's next verdict lands alone.
func TestHeldDecisionWithdrawsTheTicket(t *testing.T) {
	src := &fakeSource{items: oneStory()}
	h := &holdOnce{}
	e, _ := newTestEngine(t, src, &funcAgent{reply: promising}, func(c *Config) { c.Deciders = []Decider{h} })
	j := judgeOf(e)
	out, err := e.Run(context.Background())
	if err != nil || out.Status != StatusComplete {
		t.Fatalf("%v %s: %s", err, out.Status, out.Reason)
	}
	if got := strings.Join(h.decided, ", "); got != "hold, ahead 0" {
		t.Fatalf("decided: %s", got)
	}
	// Withdrawn, not closed with the run: its landing answers stale.
	l := h.lander
	if _, err := l.Land(context.Background(), h.held, "late", nil); !errors.Is(err, land.ErrStale) {
		t.Fatalf("the held ticket lands with %v, want stale", err)
	}
	sha := j.git.Tip("ralph/x")
	if c := j.git.Commit(sha); c.Tree != "tree-S-1-2" || c.Parents[0] != "root" || l.Landings() != 1 {
		t.Fatalf("landed %+v (%d landings)", c, l.Landings())
	}
	if is := out.State.Items["S-1"]; is.Commit != sha || is.Attempts != 0 {
		t.Fatalf("state %+v", is)
	}
}

// The plain loop keeps every iteration's work: an iteration that does not
// pass lands what it left, unverified, with the source's message; one
// that tampered keeps nothing; the one that passes lands as judged.
func TestKeepWorkLandsUnverifiedWork(t *testing.T) {
	items := []Item{{ID: "loop", Title: "the loop", Kind: "loop"}}
	src := &fakeSource{items: items, terms: func(it *Item, c *judge.Claim) {
		c.KeepWork = "ralph: loop iteration (unverified)"
	}}
	calls := 0
	ag := &funcAgent{reply: func(req agent.Request) agent.Result {
		calls++
		if calls < 4 {
			return agent.Result{FinalText: "still working"}
		}
		return promising(req)
	}}
	e, _ := newTestEngine(t, src, ag, func(c *Config) { c.Limits.MaxIterations = 10 })
	j := judgeOf(e)
	j.verdict = func(c *judge.Case, n int) (Verdict, bool) {
		if n == 2 {
			return Verdict{Summary: "no claim", Tampered: []string{"the agent edited the gates"}}, true
		}
		return Verdict{}, false
	}
	out, err := e.Run(context.Background())
	if err != nil || out.Status != StatusComplete {
		t.Fatalf("%v %s: %s", err, out.Status, out.Reason)
	}
	if got := strings.Join(j.records, " | "); got != "ralph: loop iteration (unverified) | ralph: loop iteration (unverified)" {
		t.Fatalf("work kept by iterations 1 and 3 only, got %q", got)
	}
	if got := strings.Join(j.git.History("ralph/x"), " "); got != "work-loop-1 work-loop-2 tree-loop-4" {
		t.Fatalf("history %s", got)
	}
	if is := out.State.Items["loop"]; is.Status != ItemPassed || is.Attempts != 1 || is.InProgress != 2 {
		t.Fatalf("state %+v", is)
	}
}

// writeState puts a saved state for src into p, as a crashed run leaves it.
func writeState(t *testing.T, p Paths, st *State) {
	t.Helper()
	box := newStateBox(st, p.State, time.Now)
	if err := os.MkdirAll(p.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := box.update(func(*State) {}); err != nil {
		t.Fatal(err)
	}
}

func crashedState(src Source, cur *Current) *State {
	info := src.Info()
	st := &State{Version: 1, RunID: "run-1", Source: info.Kind, SourcePath: info.Path, Status: StatusRunning,
		MaxIterations: 10, Iteration: cur.Iteration, Items: map[string]*ItemState{}, Current: []*Current{cur}}
	st.Item(cur.Item).Status = ItemRunning
	st.Item(cur.Item).Runs = 1
	return st
}

// Resume in the verify phase: judged again from the recorded final
// message, without running the agent, and landed.
func TestResumeVerifyPhaseReverifiesWithoutAgent(t *testing.T) {
	src := &fakeSource{items: oneStory()}
	ag := &funcAgent{}
	e, p := newTestEngine(t, src, ag, nil)
	j := judgeOf(e)
	writeState(t, p, crashedState(src, &Current{Item: "S-1", Iteration: 1, Attempt: 1, Phase: PhaseVerify, BaseHead: "base-S-1", Final: "all good <promise>COMPLETE</promise>"}))
	out, err := e.Run(context.Background())
	if err != nil || out.Status != StatusComplete {
		t.Fatalf("%v %s: %s", err, out.Status, out.Reason)
	}
	if len(ag.reqs) != 0 {
		t.Fatalf("the agent ran again: %d", len(ag.reqs))
	}
	if got := j.judged(); len(got) != 1 || !got[0].Claimed || got[0].Base != "base-S-1" {
		t.Fatalf("judged %+v", got)
	}
	if out.State.Counted() != 1 || out.State.Items["S-1"].Commit != j.git.Tip("ralph/x") {
		t.Errorf("counted %d iterations, want 1; %+v", out.State.Counted(), out.State.Items["S-1"])
	}
}

// Resume in the commit phase: a commit that landed (Source.Recover found
// it) is believed, with nothing judged or run again; one that did not
// land is judged again and lands.
func TestResumeCommitPhase(t *testing.T) {
	t.Run("landed", func(t *testing.T) {
		src := &fakeSource{items: oneStory(), recover: map[string]string{"S-1": "sha-landed"}}
		ag := &funcAgent{}
		var ev events
		e, p := newTestEngine(t, src, ag, func(c *Config) { c.OnEvent = ev.add })
		j := judgeOf(e)
		writeState(t, p, crashedState(src, &Current{Item: "S-1", Iteration: 1, Attempt: 1, Phase: PhaseCommit}))
		out, _ := e.Run(context.Background())
		if out.State.Items["S-1"].Commit != "sha-landed" || out.State.Items["S-1"].Status != ItemPassed || len(ag.reqs) != 0 || len(j.judged()) != 0 {
			t.Fatalf("%+v agent %d judged %d", out.State.Items["S-1"], len(ag.reqs), len(j.judged()))
		}
		if got := ev.of("recovered"); len(got) != 1 || !strings.Contains(got[0], "S-1 was committed as sha-land") {
			t.Fatalf("recovered %q", got)
		}
	})
	t.Run("not landed", func(t *testing.T) {
		src := &fakeSource{items: oneStory()}
		ag := &funcAgent{}
		e, p := newTestEngine(t, src, ag, nil)
		j := judgeOf(e)
		writeState(t, p, crashedState(src, &Current{Item: "S-1", Iteration: 1, Attempt: 1, Phase: PhaseCommit, Final: "<promise>COMPLETE</promise>"}))
		out, _ := e.Run(context.Background())
		if out.State.Items["S-1"].Commit != j.git.Tip("ralph/x") || j.git.Tip("ralph/x") == "root" || len(ag.reqs) != 0 || len(j.judged()) != 1 {
			t.Fatalf("%+v agent %d judged %d", out.State.Items["S-1"], len(ag.reqs), len(j.judged()))
		}
		if !strings.Contains(strings.Join(src.calls, ", "), "recover S-1, prepare S-1, claim S-1, landed S-1") {
			t.Fatalf("source calls %q", src.calls)
		}
	})
}

// Resume in the agent phase: the iteration runs again, refunded.
func TestResumeAgentPhaseRunsAgainWithoutSpendingAttempt(t *testing.T) {
	src := &fakeSource{items: oneStory()}
	ag := &funcAgent{}
	e, p := newTestEngine(t, src, ag, nil)
	writeState(t, p, crashedState(src, &Current{Item: "S-1", Iteration: 1, Attempt: 1, Phase: PhaseAgent}))
	out, _ := e.Run(context.Background())
	if out.Status != StatusComplete || len(ag.reqs) != 1 || out.State.Items["S-1"].Attempts != 0 || out.State.Counted() != 1 {
		t.Fatalf("%s agent %d %+v counted %d", out.Status, len(ag.reqs), out.State.Items["S-1"], out.State.Counted())
	}
	if envOf(ag.reqs[0])["RALPH_ITERATION"] != "2" {
		t.Errorf("the rerun is iteration %s, want 2", envOf(ag.reqs[0])["RALPH_ITERATION"])
	}
}

// decideStop: every reason, in order, and "go on".
func TestDecideStop(t *testing.T) {
	src := &fakeSource{items: []Item{{ID: "A", Kind: "story"}, {ID: "B", Kind: "story"}, {ID: "C", Kind: "story"}}}
	next := &Item{ID: "A"}
	base := func() *State {
		st := &State{MaxIterations: 10, Items: map[string]*ItemState{}, Order: []string{"A", "B", "C"}}
		for _, id := range st.Order {
			st.Item(id)
		}
		return st
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	cases := []struct {
		name    string
		ctx     context.Context
		mod     func(*State, *Config)
		next    *Item
		running int
		status  string
		reason  string
	}{
		{name: "go on", next: next},
		{name: "interrupted", ctx: cancelled, next: next, status: StatusInterrupted, reason: "interrupted (SIGINT)"},
		{name: "budget cost", next: next, mod: func(st *State, c *Config) { c.Limits.MaxCost = 1; st.Usage.CostUSD = 1.5 }, status: StatusBudget, reason: "budget: cost $1.5000 reached --max-cost $1.0000"},
		{name: "budget tokens", next: next, mod: func(st *State, c *Config) { c.Limits.MaxTokens = 10; st.Usage.InputTokens = 11 }, status: StatusBudget, reason: "budget: 11 tokens reached --max-tokens 10"},
		{name: "max iterations", next: next, mod: func(st *State, c *Config) { st.Iteration = 12; st.Refunds = 2 }, status: StatusMaxIterations, reason: "max iterations (10) reached with work left"},
		{name: "refunds do not count", next: next, mod: func(st *State, c *Config) { st.Iteration = 12; st.Refunds = 3 }},
		{name: "breaker same", next: next, mod: func(st *State, c *Config) { c.Limits.BreakerThreshold = 3; st.Breaker.SameCount = 3 }, status: StatusBlocked, reason: "circuit breaker: the same failure 3 times in a row (fix the cause, then `ralph run --reset-breaker` resumes)"},
		{name: "breaker no progress", next: next, mod: func(st *State, c *Config) { c.Limits.BreakerThreshold = 3; st.Breaker.NoProgress = 6 }, status: StatusBlocked, reason: "circuit breaker: no item passed in 6 iterations (fix the cause, then `ralph run --reset-breaker` resumes)"},
		{name: "nothing ready, others running", running: 1},
		{name: "nothing ready, watching", mod: func(st *State, c *Config) { c.Watch = time.Second }},
		{name: "complete", mod: func(st *State, c *Config) {
			for _, is := range st.Items {
				is.Status = ItemPassed
			}
		}, status: StatusComplete, reason: "all 3 stories passed"},
		{name: "blocked", mod: func(st *State, c *Config) { st.Items["A"].Status = ItemPassed; st.Items["B"].Status = ItemBlocked },
			status: StatusBlocked, reason: "no story can start: 1 passed, 1 blocked, 1 waiting on blocked dependencies"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, _ := newTestEngine(t, src, &funcAgent{}, nil)
			st := base()
			if tc.mod != nil {
				tc.mod(st, &e.cfg)
			}
			ctx := tc.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			status, reason := e.decideStop(ctx, st, tc.next, tc.running)
			if status != tc.status || reason != tc.reason {
				t.Fatalf("got %q %q, want %q %q", status, reason, tc.status, tc.reason)
			}
		})
	}
	t.Run("stop file, kept until acted on", func(t *testing.T) {
		e, p := newTestEngine(t, src, &funcAgent{}, nil)
		_ = os.MkdirAll(p.Dir, 0o755)
		_ = os.WriteFile(p.Stop, nil, 0o644)
		if s, _ := e.decideStop(context.Background(), base(), next, 0); s != StatusStopped {
			t.Fatalf("status %q", s)
		}
		if _, err := os.Stat(p.Stop); err != nil {
			t.Fatal("deciding removed the stop file")
		}
		out, _ := e.Run(context.Background())
		if out.Status != StatusStopped {
			t.Fatalf("run %s", out.Status)
		}
		if _, err := os.Stat(p.Stop); err == nil {
			t.Fatal("the run did not consume the stop file")
		}
	})
}

// The dry run's numbers are the run's: limits, attempts, environment.
func TestPlanMatchesRun(t *testing.T) {
	src := &fakeSource{items: oneStory()}
	ag := &funcAgent{reply: func(agent.Request) agent.Result { return agent.Result{FinalText: "no"} }}
	e, p := newTestEngine(t, src, ag, func(c *Config) { c.Limits.MaxIterations = 2; c.Limits.MaxAttempts = 1 })
	plan, err := e.Plan(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p.Dir); err == nil {
		t.Fatal("Plan wrote .ralph")
	}
	if plan.Item == nil || !strings.Contains(plan.Prompt, "Iteration 1 of at most 2; attempt 1 of 1 on this story.") {
		t.Fatalf("plan prompt:\n%s", plan.Prompt)
	}
	if envOf(plan.Request)["RALPH_RUN_ID"] != runIDPlaceholder || plan.Request.Dir != p.Root {
		t.Errorf("plan request %+v", plan.Request)
	}
	if _, err := e.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if ag.reqs[0].Prompt != plan.Prompt {
		t.Errorf("the run's first prompt differs from the plan's:\nrun:\n%s\nplan:\n%s", ag.reqs[0].Prompt, plan.Prompt)
	}
}

// An item's own template is rendered with the prompt data, its promise
// shown in place of the run's.
func TestItemTemplateAndPromise(t *testing.T) {
	src := &fakeSource{items: []Item{{ID: "design", Title: "Design", Kind: "stage", Template: "Write {{.PRDPath}} design; stage {{.Stage}}; say {{.Promise}}.", Promise: "SHIPPED"}}}
	ag := &funcAgent{}
	e, _ := newTestEngine(t, src, ag, nil)
	_, _ = e.Run(context.Background())
	if !strings.Contains(ag.reqs[0].Prompt, "Write /src/prd.json design; stage design; say SHIPPED.") {
		t.Fatalf("prompt:\n%s", ag.reqs[0].Prompt)
	}
}

// Step (the Stop-hook driver) concludes exactly as Run: the same verdicts,
// and the same stop decision and message.
func TestStepConcludesLikeRun(t *testing.T) {
	src := &fakeSource{items: []Item{{ID: "A", Title: "a", Kind: "story"}, {ID: "B", Title: "b", Kind: "story"}}}
	e, _ := newTestEngine(t, src, nil, func(c *Config) { c.Limits.MaxAttempts = 1 })
	judgeOf(e).verdict = func(c *judge.Case, _ int) (Verdict, bool) {
		if c.Item == "B" {
			return Verdict{Claimed: true, Summary: "test FAILED", Failure: "b is broken"}, true
		}
		return Verdict{}, false
	}
	ctx := context.Background()
	r, err := e.Start(ctx)
	if err != nil || r.Done || r.Item.ID != "A" || !strings.Contains(r.Prompt, "Your story: A — a") {
		t.Fatalf("start %+v %v", r, err)
	}
	r, err = e.Step(ctx, "<promise>COMPLETE</promise>")
	if err != nil || r.Done || r.Item.ID != "B" || !r.Verdict.Passed {
		t.Fatalf("step 1 %+v %v", r, err)
	}
	r, err = e.Step(ctx, "<promise>COMPLETE</promise>")
	if err != nil || !r.Done || r.Status != StatusBlocked {
		t.Fatalf("step 2 %+v %v", r, err)
	}
	if r.Reason != "no story can start: 1 passed, 1 blocked, 0 waiting on blocked dependencies" {
		t.Fatalf("hook's blocked message %q differs from the run's", r.Reason)
	}
}

// versionedSource is a fakeSource whose Items change only with its version.
type versionedSource struct {
	*fakeSource
	version  uint64
	listed   int         // Items calls
	onListed func(n int) // called by Items after the n-th call
}

func (s *versionedSource) ItemsVersion() uint64 { return s.version }
func (s *versionedSource) Items() []Item {
	s.listed++
	if s.onListed != nil {
		s.onListed(s.listed)
	}
	return s.fakeSource.Items()
}

// A source with a version is asked for its items only when the version
// moved on; when it does, the state learns the new items.
func TestItemsAskedOnlyWhenTheirVersionMoves(t *testing.T) {
	items := []Item{{ID: "S-1", Title: "one"}, {ID: "S-2", Title: "two"}, {ID: "S-3", Title: "three"}}
	src := &versionedSource{fakeSource: &fakeSource{items: items}, version: 1}
	e, _ := newTestEngine(t, src, &funcAgent{reply: promising}, nil)
	out, err := e.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != StatusComplete {
		t.Fatalf("status %s: %s", out.Status, out.Reason)
	}
	steady := src.listed
	if steady > 2 {
		t.Fatalf("Items was asked %d times over 3 iterations at one version", steady)
	}

	// A new version (a steering renamed a story and added one) is synced
	// into the state; the same version again is not asked for.
	st := &State{Items: map[string]*ItemState{}}
	e.syncItems(st, syncIteration)
	src.items = []Item{{ID: "S-1", Title: "one"}, {ID: "S-2", Title: "renamed"}, {ID: "S-3", Title: "three"}, {ID: "S-4", Title: "four"}}
	src.version = 2
	before := src.listed
	e.syncItems(st, syncIteration)
	if src.listed != before+1 || st.Items["S-2"].Title != "renamed" || len(st.Order) != 4 {
		t.Fatalf("after a new version: %d more Items calls, S-2 %q, order %v", src.listed-before, st.Items["S-2"].Title, st.Order)
	}
	e.syncItems(st, syncIteration)
	if src.listed != before+1 {
		t.Fatal("Items asked again at the same version")
	}

	// A new version mid-run reaches the state.
	src2 := &versionedSource{fakeSource: &fakeSource{items: items[:1]}, version: 1}
	src2.onListed = func(n int) {
		if n == 2 {
			src2.items = append(slices.Clone(items[:1]), Item{ID: "S-9", Title: "added"})
			src2.version = 2
		}
	}
	e2, _ := newTestEngine(t, src2, &funcAgent{reply: promising}, nil)
	out, err = e2.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != StatusComplete {
		t.Fatalf("status %s: %s", out.Status, out.Reason)
	}
	if is := out.State.Items["S-9"]; is == nil || is.Status != ItemPassed {
		t.Fatalf("the item of the new version was not worked on: %+v", out.State.Items)
	}
}
