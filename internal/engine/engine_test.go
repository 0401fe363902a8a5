package engine

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ralph-loop/ralph/internal/agent"
)

// fakeSource is a Source whose verdicts, merges and recovery are scripted
// per item, and which records every call the engine makes.
type fakeSource struct {
	items   []Item
	verdict func(a *Attempt) Verdict                // nil: passed
	accept  func(a *Attempt, n int) (string, error) // n counts Accept calls of the item
	recover map[string]string                       // item → commit that landed

	mu       sync.Mutex
	calls    []string
	accepts  map[string]int
	blocked  map[string]string
	closed   *State
	verified []Attempt
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
	return Workspace{Dir: "/work", Base: "base-" + it.ID}, nil
}
func (s *fakeSource) Verify(_ context.Context, a *Attempt, _ *State) Verdict {
	s.mu.Lock()
	s.calls = append(s.calls, "verify "+a.Item.ID)
	s.verified = append(s.verified, *a)
	s.mu.Unlock()
	if s.verdict != nil {
		return s.verdict(a)
	}
	if !a.Claimed {
		return Verdict{Summary: "no claim", Failure: "claim it"}
	}
	return Verdict{Passed: true, Claimed: true, Summary: "gates ok"}
}
func (s *fakeSource) Accept(_ context.Context, a *Attempt, _ Verdict, _ *State) (string, error) {
	s.mu.Lock()
	if s.accepts == nil {
		s.accepts = map[string]int{}
	}
	s.accepts[a.Item.ID]++
	n := s.accepts[a.Item.ID]
	s.calls = append(s.calls, "accept "+a.Item.ID)
	s.mu.Unlock()
	if s.accept != nil {
		return s.accept(a, n)
	}
	return "sha-" + a.Item.ID, nil
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
	cfg := Config{Paths: p, Source: src, Git: fakeVCS{}, Clock: &fakeClock{}, Agent: AgentConfig{Default: ag, Name: "func", Env: []string{"EXTRA=1"}}}
	if mod != nil {
		mod(&cfg)
	}
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e, p
}

func envOf(req agent.Request) map[string]string {
	m := map[string]string{}
	for _, kv := range req.Env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}

// One passing iteration: prompt, environment, transcript, state, progress.
func TestIterationPassesAndRecordsEverything(t *testing.T) {
	src := &fakeSource{items: oneStory()}
	ag := &funcAgent{reply: promising}
	e, p := newTestEngine(t, src, ag, func(c *Config) { c.Limits.MaxIterations = 4; c.Limits.MaxAttempts = 2 })
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
	is := out.State.Items["S-1"]
	if is.Status != ItemPassed || is.Commit != "sha-S-1" || is.BaseHead != "" || len(out.State.Current) != 0 {
		t.Fatalf("state %+v current %v", is, out.State.Current)
	}
	tr, _ := os.ReadFile(filepath.Join(p.Transcripts, "0001-S-1.log"))
	if !strings.Contains(string(tr), "S-1 passed: gates ok; commit sha-S-1") {
		t.Errorf("transcript:\n%s", tr)
	}
	prog, _ := os.ReadFile(p.Progress)
	if !strings.Contains(string(prog), "tests live in t/") || !strings.Contains(string(prog), "- Commit: sha-S-1") {
		t.Errorf("progress:\n%s", prog)
	}
	if src.closed == nil || src.closed.Status != StatusComplete {
		t.Error("Close was not told the final state")
	}
}

// A failed verdict spends an attempt, becomes the next prompt's retry
// context, and blocks the item after its attempts (the source's Block is
// told why).
func TestConcludeRetriesThenBlocks(t *testing.T) {
	src := &fakeSource{items: oneStory(), verdict: func(*Attempt) Verdict {
		return Verdict{Claimed: true, Summary: "test FAILED", Failure: "TestAdd: want 3, got 4"}
	}}
	ag := &funcAgent{reply: promising}
	e, _ := newTestEngine(t, src, ag, func(c *Config) { c.Limits.MaxAttempts = 2 })
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
}

// An item's own attempt cap wins over the run's.
func TestItemAttemptCap(t *testing.T) {
	items := oneStory()
	items[0].MaxAttempts = 1
	src := &fakeSource{items: items, verdict: func(*Attempt) Verdict { return Verdict{Summary: "no"} }}
	e, _ := newTestEngine(t, src, &funcAgent{}, func(c *Config) { c.Limits.MaxAttempts = 5 })
	out, _ := e.Run(context.Background())
	if out.State.Items["S-1"].Attempts != 1 || out.Status != StatusBlocked {
		t.Fatalf("%s %+v", out.Status, out.State.Items["S-1"])
	}
}

// Accept's rejection is a failed, claimed iteration; the next one passes.
func TestAcceptRejectedIsFailedAttempt(t *testing.T) {
	src := &fakeSource{items: oneStory(), accept: func(a *Attempt, n int) (string, error) {
		if n == 1 {
			return "", &Rejected{Summary: "integrated gates failed", Failure: "merge broke test"}
		}
		return "sha-2", nil
	}}
	ag := &funcAgent{reply: promising}
	e, _ := newTestEngine(t, src, ag, nil)
	out, _ := e.Run(context.Background())
	is := out.State.Items["S-1"]
	if out.Status != StatusComplete || is.Commit != "sha-2" || is.Attempts != 1 {
		t.Fatalf("%s %+v", out.Status, is)
	}
	if !strings.Contains(ag.reqs[1].Prompt, "merge broke test") {
		t.Error("rejection is not the retry context")
	}
}

// A conflict runs a resolver with the same environment as every agent,
// its own prompt in the prompt file, and accepts again.
func TestAcceptConflictRunsResolverWithFullEnv(t *testing.T) {
	src := &fakeSource{items: oneStory(), accept: func(a *Attempt, n int) (string, error) {
		if n == 1 {
			return "", &Conflict{Paths: []string{"f.txt"}, Context: "both sides changed f.txt"}
		}
		return "sha-merged", nil
	}}
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
	out, _ := e.Run(context.Background())
	if out.Status != StatusComplete || out.State.Items["S-1"].Commit != "sha-merged" {
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

// Resume in the verify phase: verified again from the recorded final
// message, without running the agent.
func TestResumeVerifyPhaseReverifiesWithoutAgent(t *testing.T) {
	src := &fakeSource{items: oneStory()}
	ag := &funcAgent{}
	e, p := newTestEngine(t, src, ag, nil)
	writeState(t, p, crashedState(src, &Current{Item: "S-1", Iteration: 1, Attempt: 1, Phase: PhaseVerify, Final: "all good <promise>COMPLETE</promise>"}))
	out, err := e.Run(context.Background())
	if err != nil || out.Status != StatusComplete {
		t.Fatalf("%v %s: %s", err, out.Status, out.Reason)
	}
	if len(ag.reqs) != 0 {
		t.Fatalf("the agent ran again: %d", len(ag.reqs))
	}
	if len(src.verified) != 1 || !src.verified[0].Claimed {
		t.Fatalf("verified %+v", src.verified)
	}
	if out.State.Counted() != 1 {
		t.Errorf("counted %d iterations, want 1", out.State.Counted())
	}
}

// Resume in the commit phase: a commit that landed is believed; one that
// did not is verified again.
func TestResumeCommitPhase(t *testing.T) {
	t.Run("landed", func(t *testing.T) {
		src := &fakeSource{items: oneStory(), recover: map[string]string{"S-1": "sha-landed"}}
		ag := &funcAgent{}
		e, p := newTestEngine(t, src, ag, nil)
		writeState(t, p, crashedState(src, &Current{Item: "S-1", Iteration: 1, Attempt: 1, Phase: PhaseCommit}))
		out, _ := e.Run(context.Background())
		if out.State.Items["S-1"].Commit != "sha-landed" || len(ag.reqs) != 0 || len(src.verified) != 0 {
			t.Fatalf("%+v agent %d verify %d", out.State.Items["S-1"], len(ag.reqs), len(src.verified))
		}
	})
	t.Run("not landed", func(t *testing.T) {
		src := &fakeSource{items: oneStory()}
		ag := &funcAgent{}
		e, p := newTestEngine(t, src, ag, nil)
		writeState(t, p, crashedState(src, &Current{Item: "S-1", Iteration: 1, Attempt: 1, Phase: PhaseCommit, Final: "<promise>COMPLETE</promise>"}))
		out, _ := e.Run(context.Background())
		if out.State.Items["S-1"].Commit != "sha-S-1" || len(ag.reqs) != 0 || len(src.verified) != 1 {
			t.Fatalf("%+v agent %d verify %d", out.State.Items["S-1"], len(ag.reqs), len(src.verified))
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
	src := &fakeSource{items: []Item{{ID: "A", Title: "a", Kind: "story"}, {ID: "B", Title: "b", Kind: "story"}},
		verdict: func(a *Attempt) Verdict {
			if a.Item.ID == "B" {
				return Verdict{Claimed: true, Summary: "test FAILED", Failure: "b is broken"}
			}
			return Verdict{Passed: true, Claimed: true, Summary: "ok"}
		}}
	e, _ := newTestEngine(t, src, nil, func(c *Config) { c.Limits.MaxAttempts = 1 })
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
