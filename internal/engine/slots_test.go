package engine

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// stagingSource is a dagSource whose items work in trees of their own
// (a Workspace with Commit); Accept waits for gate to close, and may
// report one conflict per item listed in conflict.
type stagingSource struct {
	*dagSource
	gate     chan struct{}
	conflict map[string]bool
	mu2      sync.Mutex
	inAccept []string
}

func (s *stagingSource) Prepare(context.Context, *Item, *State) (Workspace, error) {
	return Workspace{Dir: "/work", Commit: func(_ context.Context, a *Attempt, _ Verdict) error {
		a.Files = []string{a.Item.ID + ".txt"}
		return nil
	}}, nil
}
func (s *stagingSource) Accept(ctx context.Context, a *Attempt, v Verdict, st *State) (string, error) {
	s.mu2.Lock()
	s.inAccept = append(s.inAccept, a.Item.ID)
	c := s.conflict[a.Item.ID]
	delete(s.conflict, a.Item.ID)
	s.mu2.Unlock()
	if c {
		return "", &Conflict{Paths: []string{"f.txt"}, Context: "both changed f.txt"}
	}
	if s.gate != nil {
		<-s.gate
	}
	return s.dagSource.Accept(ctx, a, v, st)
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
// waits in the merge queue: the queue holds no slot.
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
	e, err := New(Config{Paths: PathsFor(t.TempDir()), Source: src, Git: fakeVCS{}, Parallel: 1, Clock: &fakeClock{}, Agent: AgentConfig{Default: ag, Name: "rec"}, Limits: Limits{MaxAttempts: 2}})
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
		t.Fatal("B's agent never started while A waited to merge")
	}
	if ag.maxRunning != 1 {
		t.Fatalf("agents at once: %d, want 1", ag.maxRunning)
	}
	if got := strings.Join(src.accepted, " "); got != "A B" {
		t.Fatalf("accepted %s", got)
	}
}

// A source that works in the main tree keeps the slot until the item is
// recorded: with one slot, B starts only after A was accepted.
func TestSlotHeldWithoutOwnTrees(t *testing.T) {
	src := twoIndependent()
	ag := &recAgent{hold: 5 * time.Millisecond}
	var order []string
	var mu sync.Mutex
	rec := &recordingAccept{dagSource: src, onAccept: func(id string) { mu.Lock(); order = append(order, "accept "+id); mu.Unlock() }}
	ag.onStart = func(id string) { mu.Lock(); order = append(order, "start "+id); mu.Unlock() }
	e, _ := New(Config{Paths: PathsFor(t.TempDir()), Source: rec, Git: fakeVCS{}, Parallel: 1, Clock: &fakeClock{}, Agent: AgentConfig{Default: ag, Name: "rec"}})
	if out, err := e.Run(context.Background()); err != nil || out.Status != StatusComplete {
		t.Fatalf("%v %s", err, out.Status)
	}
	if got := strings.Join(order, ", "); got != "start A, accept A, start B, accept B" {
		t.Fatalf("order: %s", got)
	}
}

type recordingAccept struct {
	*dagSource
	onAccept func(id string)
}

func (s *recordingAccept) Accept(ctx context.Context, a *Attempt, v Verdict, st *State) (string, error) {
	s.onAccept(a.Item.ID)
	return s.dagSource.Accept(ctx, a, v, st)
}

// A conflict resolver runs an agent, so it waits for a slot like any
// other: agents never exceed the bound.
func TestResolverTakesASlot(t *testing.T) {
	src := &stagingSource{dagSource: twoIndependent(), conflict: map[string]bool{"A": true}}
	ag := &recAgent{hold: 20 * time.Millisecond}
	e, _ := New(Config{Paths: PathsFor(t.TempDir()), Source: src, Git: fakeVCS{}, Parallel: 1, Clock: &fakeClock{}, Agent: AgentConfig{Default: ag, Name: "rec"}, Limits: Limits{MaxAttempts: 2}})
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

// Parallel workers each have their own prompt file; files listed by the
// staging source reach progress.md.
func TestParallelPromptFilesAreSeparate(t *testing.T) {
	dir := t.TempDir()
	src := &stagingSource{dagSource: twoIndependent()}
	ag := &recAgent{hold: 20 * time.Millisecond}
	e, _ := New(Config{Paths: PathsFor(dir), Source: src, Git: fakeVCS{}, Parallel: 2, Clock: &fakeClock{}, Agent: AgentConfig{Default: ag, Name: "rec"}})
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
