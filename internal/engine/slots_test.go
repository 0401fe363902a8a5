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

	"github.com/ralph-loop/ralph/internal/judge"
)

// stagingSource is a dagSource whose items work in trees of their own
// (an Isolated workspace); the landing of its items waits for gate to
// close (Landed runs in the item's commit phase), and a conflict is
// readied for a resolver.
type stagingSource struct {
	*dagSource
	gate chan struct{}
}

func (s *stagingSource) Prepare(context.Context, *Item, *State) (Workspace, error) {
	return Workspace{Dir: "/work", Isolated: true}, nil
}
func (s *stagingSource) Landed(ctx context.Context, a *Attempt, v Verdict, commit string, st *State) error {
	if s.gate != nil {
		<-s.gate
	}
	return s.dagSource.Landed(ctx, a, v, commit, st)
}
func (s *stagingSource) Conflict(context.Context, *Item, []string) (string, error) {
	return "both changed f.txt", nil
}

// stagingJudge is a fake judge that lists each item's file as its work
// and answers a conflict at the first judging of the items in conflict.
func stagingJudge(conflict ...string) *fakeJudge {
	j := newFakeJudge()
	j.files = func(item string) []string { return []string{item + ".txt"} }
	j.verdict = func(c *judge.Case, n int) (Verdict, bool) {
		if n == 1 && slices.Contains(conflict, c.Item) {
			return Verdict{Claimed: true, Summary: "merge conflict in f.txt", Conflict: &judge.Conflict{Paths: []string{"f.txt"}}}, true
		}
		return Verdict{}, false
	}
	return j
}

func twoIndependent() *dagSource {
	return &dagSource{
		items:    []Item{{ID: "A", Title: "a", Kind: "story"}, {ID: "B", Title: "b", Kind: "story"}},
		deps:     map[string][]string{},
		priority: map[string]int{"A": 1, "B": 2},
		fail:     map[string]bool{},
	}
}

// With one slot and stories in trees of their own, B's agent runs while A
// is landing: the commit phase holds no slot.
func TestSlotFreedWhileItemWaitsToMerge(t *testing.T) {
	ag := &recAgent{hold: 10 * time.Millisecond}
	src := &stagingSource{dagSource: twoIndependent(), gate: make(chan struct{})}
	started := make(chan struct{})
	go func() {
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			ag.mu.Lock()
			n := len(ag.starts)
			ag.mu.Unlock()
			if n == 2 {
				close(started)
				break
			}
			time.Sleep(2 * time.Millisecond)
		}
		close(src.gate)
	}()
	e, err := New(Config{Paths: PathsFor(t.TempDir()), Source: src, Git: fakeVCS{}, Judge: stagingJudge(), Parallel: 1, Clock: &fakeClock{}, Agent: AgentConfig{Default: ag, Name: "rec"}, Limits: Limits{MaxAttempts: 2}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.Run(context.Background())
	if err != nil || res.Status != StatusComplete {
		t.Fatalf("%v %s %s", err, res.Status, res.Reason)
	}
	select {
	case <-started:
	default:
		t.Fatal("B's agent never started while A was landing")
	}
	if ag.maxRunning != 1 {
		t.Fatalf("agents at once: %d, want 1", ag.maxRunning)
	}
	if got := strings.Join(src.accepted, " "); got != "A B" {
		t.Fatalf("accepted %s", got)
	}
}

// A source that works in the main tree keeps the slot until the item
// landed: with one slot, B starts only after A landed.
func TestSlotHeldWithoutOwnTrees(t *testing.T) {
	src := twoIndependent()
	ag := &recAgent{hold: 5 * time.Millisecond}
	var order []string
	var mu sync.Mutex
	rec := &recordingLanded{dagSource: src, onLanded: func(id string) { mu.Lock(); order = append(order, "landed "+id); mu.Unlock() }}
	ag.onStart = func(id string) { mu.Lock(); order = append(order, "start "+id); mu.Unlock() }
	e, _ := New(Config{Paths: PathsFor(t.TempDir()), Source: rec, Git: fakeVCS{}, Judge: newFakeJudge(), Parallel: 1, Clock: &fakeClock{}, Agent: AgentConfig{Default: ag, Name: "rec"}})
	if out, err := e.Run(context.Background()); err != nil || out.Status != StatusComplete {
		t.Fatalf("%v %s", err, out.Status)
	}
	if got := strings.Join(order, ", "); got != "start A, landed A, start B, landed B" {
		t.Fatalf("order: %s", got)
	}
}

type recordingLanded struct {
	*dagSource
	onLanded func(id string)
}

func (s *recordingLanded) Landed(ctx context.Context, a *Attempt, v Verdict, commit string, st *State) error {
	s.onLanded(a.Item.ID)
	return s.dagSource.Landed(ctx, a, v, commit, st)
}

// A conflict resolver runs an agent, so it waits for a slot like any
// other: agents never exceed the bound.
func TestResolverTakesASlot(t *testing.T) {
	src := &stagingSource{dagSource: twoIndependent()}
	ag := &recAgent{hold: 20 * time.Millisecond}
	e, _ := New(Config{Paths: PathsFor(t.TempDir()), Source: src, Git: fakeVCS{}, Judge: stagingJudge("A"), Parallel: 1, Clock: &fakeClock{}, Agent: AgentConfig{Default: ag, Name: "rec"}, Limits: Limits{MaxAttempts: 2}})
	out, err := e.Run(context.Background())
	if err != nil || out.Status != StatusComplete {
		t.Fatalf("%v %s %s", err, out.Status, out.Reason)
	}
	if ag.maxRunning != 1 {
		t.Fatalf("agents at once: %d, want 1", ag.maxRunning)
	}
	if got := strings.Join(ag.starts, " "); !strings.Contains(got, "A#resolve") {
		t.Fatalf("no resolver ran: %s", got)
	}
}

// Parallel workers each have their own prompt file; the files the judge
// lists reach progress.md.
func TestParallelPromptFilesAreSeparate(t *testing.T) {
	dir := t.TempDir()
	src := &stagingSource{dagSource: twoIndependent()}
	ag := &recAgent{hold: 20 * time.Millisecond}
	e, _ := New(Config{Paths: PathsFor(dir), Source: src, Git: fakeVCS{}, Judge: stagingJudge(), Parallel: 2, Clock: &fakeClock{}, Agent: AgentConfig{Default: ag, Name: "rec"}})
	if out, err := e.Run(context.Background()); err != nil || out.Status != StatusComplete {
		t.Fatalf("%v %s", err, out.Status)
	}
	for _, id := range []string{"A", "B"} {
		pf := filepath.Join(dir, ".ralph", "prompts", id+".md")
		if got := ag.promptFiles[id]; got != pf {
			t.Errorf("%s prompt file %q, want %q", id, got, pf)
		}
		b, err := os.ReadFile(pf)
		if err != nil || !strings.Contains(string(b), id) {
			t.Errorf("%s prompt file: %v %q", id, err, b)
		}
	}
	progress, _ := os.ReadFile(filepath.Join(dir, ".ralph", "progress.md"))
	if !strings.Contains(string(progress), "A.txt") || !strings.Contains(string(progress), "B.txt") {
		t.Fatalf("staged files missing from progress:\n%s", progress)
	}
}

func TestAgentSlots(t *testing.T) {
	s := newAgentSlots(1)
	if !s.tryTake("A") || s.tryTake("B") {
		t.Fatal("one slot: A takes it, B cannot")
	}
	s.release("A")
	select {
	case <-s.wake:
	default:
		t.Fatal("release did not wake the scheduler")
	}
	if !s.tryTake("B") {
		t.Fatal("A's released slot is free")
	}
	// A's resolver waits for B's slot.
	got := make(chan func(), 1)
	go func() {
		give, err := s.retake(context.Background(), "A")
		if err != nil {
			t.Error(err)
		}
		got <- give
	}()
	select {
	case <-got:
		t.Fatal("retake did not wait for the busy slot")
	case <-time.After(30 * time.Millisecond):
	}
	s.done("B")
	give := <-got
	if s.free() {
		t.Fatal("the resolver holds the slot")
	}
	give()
	give() // idempotent
	s.done("A")
	if !s.free() || len(s.sem) != 0 {
		t.Fatalf("slots leaked: %d taken", len(s.sem))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s.tryTake("C")
	s.release("C")
	s.tryTake("D")
	if _, err := s.retake(ctx, "C"); err == nil {
		t.Fatal("retake ignored a cancelled context")
	}
}
