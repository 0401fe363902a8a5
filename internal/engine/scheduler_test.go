package engine

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/ralph-loop/ralph/internal/agent"
	"github.com/ralph-loop/ralph/internal/judge"
)

// fakeVCS is version control that never changes.
type fakeVCS struct{}

func (fakeVCS) EnsureExcluded(context.Context, string) error                 { return nil }
func (fakeVCS) Changed(context.Context, string, ...string) ([]string, error) { return nil, nil }
func (fakeVCS) HeadOf(context.Context, string) (string, error)               { return "base", nil }
func (fakeVCS) CommitsSince(context.Context, string, string) (int, error)    { return 0, nil }
func (fakeVCS) RemoveStaleLocks(context.Context) ([]string, []string, error) { return nil, nil, nil }

// dagSource is a Source over a DAG whose items land on main; items
// listed in fail never pass (the source refuses their claim).
type dagSource struct {
	items    []Item
	deps     map[string][]string
	priority map[string]int
	fail     map[string]bool

	mu       sync.Mutex
	accepted []string // the items that landed, in order
}

func (s *dagSource) Info() SourceInfo {
	return SourceInfo{Kind: "prd", Path: "dag", ItemKind: "story"}
}
func (s *dagSource) Items() []Item { return s.items }
func (s *dagSource) Next(st *State, busy map[string]bool) (*Item, error) {
	var ready []Item
	for _, it := range s.items {
		is := st.Items[it.ID]
		if is.Status == ItemPassed || is.Status == ItemBlocked || busy[it.ID] {
			continue
		}
		ok := true
		for _, d := range s.deps[it.ID] {
			if st.Items[d].Status != ItemPassed {
				ok = false
			}
		}
		if ok {
			ready = append(ready, it)
		}
	}
	if len(ready) == 0 {
		return nil, nil
	}
	sort.SliceStable(ready, func(i, j int) bool { return s.priority[ready[i].ID] < s.priority[ready[j].ID] })
	return &ready[0], nil
}
func (s *dagSource) Prepare(context.Context, *Item, *State) (Workspace, error) {
	return Workspace{Dir: "/work"}, nil
}
func (s *dagSource) Terms(it *Item, _ *State) judge.Claim {
	return judge.Claim{Target: "main", Subject: "feat(" + it.ID + ")"}
}
func (s *dagSource) Claim(_ context.Context, a *Attempt, st *State) judge.Claim {
	c := s.Terms(a.Item, st)
	if s.fail[a.Item.ID] {
		c.Refused = &Verdict{Claimed: true, Summary: "test FAILED", Failure: "boom"}
	}
	return c
}
func (s *dagSource) Landed(_ context.Context, a *Attempt, _ Verdict, _ string, _ *State) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.accepted = append(s.accepted, a.Item.ID)
	return nil
}
func (s *dagSource) Block(context.Context, *Item, *State, string) error { return nil }
func (s *dagSource) Recover(context.Context, *Item, *State) (string, bool, error) {
	return "", false, nil
}
func (s *dagSource) Sync(*State, SyncReason) error { return nil }
func (s *dagSource) Close(*State) error            { return nil }

// recAgent records starts and concurrency; it can report one rate limit.
type recAgent struct {
	mu         sync.Mutex
	running    int
	maxRunning int
	starts     []string
	rateLimit  map[string]time.Duration
	hold       time.Duration
	// meet: the first meet agents wait (up to 5 s) until that many run
	// at once, so a test of concurrency does not hang on timing.
	meet    int
	onStart func(id string)
	// promptFiles is each item's $RALPH_PROMPT_FILE.
	promptFiles map[string]string
}

func (a *recAgent) Name() string                                 { return "rec" }
func (a *recAgent) Plan(agent.Request) (agent.Invocation, error) { return agent.Invocation{}, nil }
func (a *recAgent) Run(ctx context.Context, req agent.Request) (agent.Result, error) {
	a.mu.Lock()
	a.running++
	if a.running > a.maxRunning {
		a.maxRunning = a.running
	}
	a.starts = append(a.starts, req.ItemID)
	if a.promptFiles == nil {
		a.promptFiles = map[string]string{}
	}
	a.promptFiles[req.ItemID] = req.PromptFile
	if a.onStart != nil {
		a.onStart(req.ItemID)
	}
	rl, limited := a.rateLimit[req.ItemID]
	if limited {
		delete(a.rateLimit, req.ItemID)
	}
	first := len(a.starts) <= a.meet
	a.mu.Unlock()
	for deadline := time.Now().Add(5 * time.Second); first && time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		a.mu.Lock()
		met := a.maxRunning >= a.meet
		a.mu.Unlock()
		if met {
			break
		}
	}
	time.Sleep(a.hold)
	a.mu.Lock()
	a.running--
	a.mu.Unlock()
	if limited {
		return agent.Result{RateLimit: &agent.RateLimit{ResetAt: time.Now().Add(rl), Message: "limit"}}, nil
	}
	return agent.Result{FinalText: "<promise>COMPLETE</promise>"}, nil
}

// fakeClock records sleeps instead of sleeping.
type fakeClock struct {
	mu     sync.Mutex
	slept  []time.Duration
	offset time.Duration
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}
func (c *fakeClock) Sleep(_ context.Context, d time.Duration) error {
	c.mu.Lock()
	c.slept = append(c.slept, d)
	c.offset += d
	c.mu.Unlock()
	return nil
}

func runDAG(t *testing.T, src *dagSource, ag *recAgent, parallel int, clock Clock) Outcome {
	t.Helper()
	e, err := New(Config{Paths: PathsFor(t.TempDir()), Source: src, Git: fakeVCS{}, Judge: newFakeJudge(), Parallel: parallel, Clock: clock, Agent: AgentConfig{Default: ag, Name: "rec"}, Limits: Limits{MaxAttempts: 2}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := e.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func diamond() *dagSource {
	ids := []string{"A", "B", "C", "D", "E", "F"}
	var items []Item
	for _, id := range ids {
		items = append(items, Item{ID: id, Title: id, Kind: "story"})
	}
	return &dagSource{
		items:    items,
		deps:     map[string][]string{"D": {"A", "B"}, "E": {"C"}, "F": {"D", "E"}},
		priority: map[string]int{"A": 2, "B": 1, "C": 3, "D": 1, "E": 1, "F": 1},
		fail:     map[string]bool{},
	}
}

func TestSchedulerDependencyOrderAndBound(t *testing.T) {
	for _, n := range []int{1, 2, 3} {
		t.Run(fmt.Sprint("parallel=", n), func(t *testing.T) {
			src := diamond()
			ag := &recAgent{hold: 20 * time.Millisecond, meet: n}
			out := runDAG(t, src, ag, n, &fakeClock{})
			if out.Status != StatusComplete {
				t.Fatalf("status %s: %s", out.Status, out.Reason)
			}
			pos := map[string]int{}
			for i, id := range src.accepted {
				pos[id] = i
			}
			for id, deps := range src.deps {
				for _, d := range deps {
					if pos[d] > pos[id] {
						t.Errorf("%s accepted before its dependency %s: %v", id, d, src.accepted)
					}
				}
			}
			if ag.maxRunning > n {
				t.Errorf("max concurrency %d > %d", ag.maxRunning, n)
			}
			if n == 3 && ag.maxRunning != 3 {
				t.Errorf("three independent stories never ran at once (max %d)", ag.maxRunning)
			}
		})
	}
}

func TestSchedulerPriorityWhenSequential(t *testing.T) {
	src := diamond()
	ag := &recAgent{}
	runDAG(t, src, ag, 1, &fakeClock{})
	if got := fmt.Sprint(ag.starts[:3]); got != "[B A D]" {
		t.Fatalf("start order %s, want B A D (priority; D is ready once A and B passed and outranks C)", got)
	}
}

func TestSchedulerBlockedDependentsNeverStart(t *testing.T) {
	src := diamond()
	src.fail["A"] = true
	ag := &recAgent{}
	out := runDAG(t, src, ag, 2, &fakeClock{})
	if out.Status != StatusBlocked {
		t.Fatalf("status %s", out.Status)
	}
	for _, id := range ag.starts {
		if id == "D" || id == "F" {
			t.Fatalf("%s started although A is blocked: %v", id, ag.starts)
		}
	}
	if out.State.Items["A"].Attempts != 2 || out.State.Items["E"].Status != ItemPassed {
		t.Fatalf("state %+v %+v", out.State.Items["A"], out.State.Items["E"])
	}
}

func TestRateLimitWaitsWithoutSpendingAttempt(t *testing.T) {
	src := diamond()
	ag := &recAgent{rateLimit: map[string]time.Duration{"B": 90 * time.Second}}
	clock := &fakeClock{}
	out := runDAG(t, src, ag, 1, clock)
	if out.Status != StatusComplete {
		t.Fatalf("status %s", out.Status)
	}
	if out.State.Items["B"].Attempts != 0 {
		t.Fatalf("rate limit spent an attempt: %+v", out.State.Items["B"])
	}
	if len(clock.slept) != 1 || clock.slept[0] < 80*time.Second || clock.slept[0] > 91*time.Second {
		t.Fatalf("slept %v, want ~90s once", clock.slept)
	}
	if out.State.Counted() != 6 {
		t.Fatalf("counted iterations %d, want 6 (the limited one refunded)", out.State.Counted())
	}
}

func TestMaxIterationsStops(t *testing.T) {
	src := diamond()
	src.fail["B"] = true
	e, _ := New(Config{Paths: PathsFor(t.TempDir()), Source: src, Git: fakeVCS{}, Judge: newFakeJudge(), Clock: &fakeClock{}, Agent: AgentConfig{Default: &recAgent{}}, Limits: Limits{MaxIterations: 2, MaxAttempts: 5}})
	out, err := e.Run(context.Background())
	if err != nil || out.Status != StatusMaxIterations {
		t.Fatalf("%v %s", err, out.Status)
	}
}

func TestStateIsWrittenAndResumable(t *testing.T) {
	dir := t.TempDir()
	src := diamond()
	e, _ := New(Config{Paths: PathsFor(dir), Source: src, Git: fakeVCS{}, Judge: newFakeJudge(), Clock: &fakeClock{}, Agent: AgentConfig{Default: &recAgent{}}})
	if _, err := e.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	st, err := LoadState(filepath.Join(dir, ".ralph", "state.json"))
	if err != nil || st == nil {
		t.Fatal(err)
	}
	p, _, total := st.Counts()
	if p != total || total != 6 {
		t.Fatalf("%d/%d", p, total)
	}
	// A second run over the same source resumes the finished state.
	e2, _ := New(Config{Paths: PathsFor(dir), Source: diamond(), Git: fakeVCS{}, Judge: newFakeJudge(), Clock: &fakeClock{}, Agent: AgentConfig{Default: &recAgent{}}})
	ag := &recAgent{}
	e2.cfg.Agent.Default = ag
	out, _ := e2.Run(context.Background())
	if out.Status != StatusComplete || len(ag.starts) != 0 {
		t.Fatalf("resume redid work: %s %v", out.Status, ag.starts)
	}
}
