package land_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ralph-loop/ralph/internal/land"
	"github.com/ralph-loop/ralph/internal/land/landtest"
)

// newLander is the lander of main in a repository where main is at Root.
func newLander(t *testing.T) (*land.Lander, *landtest.Git) {
	t.Helper()
	g := landtest.New()
	g.Ensure("main")
	l, err := land.New(context.Background(), g, "main", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	return l, g
}

// enqueue queues a plan of tree for item on the end of l's queue.
func enqueue(t *testing.T, l *land.Lander, item, tree string) *land.Ticket {
	t.Helper()
	on, base, _ := l.End()
	tk, err := l.Enqueue(land.Plan{Item: item, Tree: tree, On: on, Base: base})
	if err != nil {
		t.Fatalf("queueing %s: %v", item, err)
	}
	return tk
}

// landing is a Land under way in its own goroutine.
type landing struct {
	done chan struct{}
	sha  string
	err  error
}

func landAsync(ctx context.Context, l *land.Lander, tk *land.Ticket, msg string) *landing {
	r := &landing{done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.sha, r.err = l.Land(ctx, tk, msg, nil)
	}()
	return r
}

// wait returns the landing's result, failing the test if it never ends.
func (r *landing) wait(t *testing.T) (string, error) {
	t.Helper()
	select {
	case <-r.done:
		return r.sha, r.err
	case <-time.After(10 * time.Second):
		t.Fatal("the landing never ended")
		return "", nil
	}
}

// ended reports whether the landing ended within a moment.
func (r *landing) ended() bool {
	select {
	case <-r.done:
		return true
	case <-time.After(20 * time.Millisecond):
		return false
	}
}

// A plan built on the tip lands as a commit of exactly its tree on the
// tip, with its message: the branch moves by a compare-and-swap, and the
// checkout follows before anything else lands.
func TestLandFastForwardsOnTheTip(t *testing.T) {
	ctx := context.Background()
	l, g := newLander(t)
	on, base, tree := l.End()
	if on != nil || base != landtest.Root || tree != "tree-root" {
		t.Fatalf("End on an empty queue: %v %q %q", on, base, tree)
	}
	tk := enqueue(t, l, "A", "tree-a")
	var applied []string
	sha, err := l.Land(ctx, tk, "feat(A)\n", func(_ context.Context, old, landed string) error {
		applied = append(applied, old, landed, g.Tip("main"))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	c := g.Commit(sha)
	if g.Tip("main") != sha || c.Tree != "tree-a" || len(c.Parents) != 1 || c.Parents[0] != landtest.Root || c.Msg != "feat(A)\n" {
		t.Fatalf("main at %s, landed %s: %+v", g.Tip("main"), sha, c)
	}
	if strings.Join(applied, " ") != landtest.Root+" "+sha+" "+sha {
		t.Fatalf("apply saw %q", applied)
	}
	if l.Tip() != sha || l.Landings() != 1 || !l.Made(sha) || l.Made(landtest.Root) {
		t.Fatalf("tip %s, %d landings, made %v/%v", l.Tip(), l.Landings(), l.Made(sha), l.Made(landtest.Root))
	}
	if on, base, tree := l.End(); on != nil || base != sha || tree != "tree-a" {
		t.Fatalf("End after the landing: %v %q %q", on, base, tree)
	}
	// Landing a ticket again answers what it answered.
	if again, err := l.Land(ctx, tk, "again", nil); again != sha || err != nil {
		t.Fatalf("landed again: %s %v", again, err)
	}
}

// A plan not built on the end of the queue is stale at once.
func TestEnqueueOffTheEndIsStale(t *testing.T) {
	l, _ := newLander(t)
	if _, err := l.Enqueue(land.Plan{Item: "A", Tree: "t", Base: "c9999"}); !errors.Is(err, land.ErrStale) {
		t.Fatalf("a plan on another commit: %v", err)
	}
	a := enqueue(t, l, "A", "tree-a")
	if _, err := l.Enqueue(land.Plan{Item: "B", Tree: "t", Base: landtest.Root}); !errors.Is(err, land.ErrStale) {
		t.Fatalf("a plan on the tip behind a queued one: %v", err)
	}
	b := enqueue(t, l, "B", "tree-b")
	if _, err := l.Enqueue(land.Plan{Item: "C", Tree: "t", On: a}); !errors.Is(err, land.ErrStale) {
		t.Fatalf("a plan on a plan that is not the last: %v", err)
	}
	if l.Ahead(a) != 0 || l.Ahead(b) != 1 {
		t.Fatalf("ahead: %d %d", l.Ahead(a), l.Ahead(b))
	}
}

// A plan built on a plan ahead of it waits for that one to land, and then
// lands on its commit, in queue order, whichever asked first.
func TestPlanOnAPlanAheadLandsAfterIt(t *testing.T) {
	ctx := context.Background()
	l, g := newLander(t)
	a := enqueue(t, l, "A", "tree-a")
	b := enqueue(t, l, "B", "tree-b")
	if on, _, tree := l.End(); on != b || tree != "tree-b" {
		t.Fatalf("End is %v %q, want B's plan", on, tree)
	}
	lb := landAsync(ctx, l, b, "feat(B)")
	if lb.ended() {
		t.Fatalf("B landed before A: %s %v", lb.sha, lb.err)
	}
	shaA, err := l.Land(ctx, a, "feat(A)", nil)
	if err != nil {
		t.Fatal(err)
	}
	shaB, err := lb.wait(t)
	if err != nil {
		t.Fatal(err)
	}
	if c := g.Commit(shaB); c.Parents[0] != shaA || c.Tree != "tree-b" || g.Tip("main") != shaB {
		t.Fatalf("B landed as %+v on %s; main at %s", c, shaA, g.Tip("main"))
	}
	if got := strings.Join(g.History("main"), " "); got != "tree-a tree-b" {
		t.Fatalf("history %s", got)
	}
	if b.Plan().On != a || l.Landings() != 2 {
		t.Fatalf("B's plan %+v, %d landings", b.Plan(), l.Landings())
	}
}

// Withdrawing a plan (its judgement failed, a decider holds it) makes
// every plan built on it stale at once, though plans ahead of it are
// still being judged; those still land, and the end of the queue is what
// is left before it.
func TestWithdrawMakesThePlansOnItStale(t *testing.T) {
	ctx := context.Background()
	l, g := newLander(t)
	a := enqueue(t, l, "A", "tree-a")
	b := enqueue(t, l, "B", "tree-b")
	c := enqueue(t, l, "C", "tree-c")
	lc := landAsync(ctx, l, c, "feat(C)")
	l.Withdraw(b)
	if _, err := lc.wait(t); !errors.Is(err, land.ErrStale) {
		t.Fatalf("C, built on the withdrawn B: %v", err)
	}
	if _, err := l.Land(ctx, b, "feat(B)", nil); !errors.Is(err, land.ErrStale) {
		t.Fatalf("the withdrawn B: %v", err)
	}
	if on, _, _ := l.End(); on != a {
		t.Fatalf("End is %v, want A's plan", on)
	}
	if _, err := l.Land(ctx, a, "feat(A)", nil); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(g.History("main"), " "); got != "tree-a" {
		t.Fatalf("history %s", got)
	}
	l.Withdraw(nil) // nothing
	l.Withdraw(a)   // landed: nothing
	if l.Tip() != g.Tip("main") {
		t.Fatal("withdrawing a landed plan moved the tip")
	}
	// The first plan withdrawn: the one built on it is stale at once.
	d := enqueue(t, l, "D", "tree-d")
	e := enqueue(t, l, "E", "tree-e")
	l.Withdraw(d)
	if _, err := l.Land(ctx, e, "feat(E)", nil); !errors.Is(err, land.ErrStale) {
		t.Fatalf("E, built on the withdrawn D: %v", err)
	}
	if on, base, _ := l.End(); on != nil || base != l.Tip() {
		t.Fatalf("End after the queue emptied: %v %s", on, base)
	}
}

// A cancelled landing leaves the queue: the plans built on it are stale
// at once.
func TestCancelledLandingLeavesTheQueue(t *testing.T) {
	l, _ := newLander(t)
	a := enqueue(t, l, "A", "tree-a")
	b := enqueue(t, l, "B", "tree-b")
	c := enqueue(t, l, "C", "tree-c")
	ctx, cancel := context.WithCancel(context.Background())
	lb := landAsync(ctx, l, b, "feat(B)")
	cancel()
	if _, err := lb.wait(t); !errors.Is(err, land.ErrStale) {
		t.Fatalf("the cancelled B: %v", err)
	}
	// At once: not once A, ahead of it, landed or left.
	if _, err := landAsync(context.Background(), l, c, "feat(C)").wait(t); !errors.Is(err, land.ErrStale) {
		t.Fatalf("C, built on the cancelled B: %v", err)
	}
	if on, _, _ := l.End(); on != a {
		t.Fatalf("End is %v, want A's plan", on)
	}
	if _, err := l.Land(context.Background(), a, "feat(A)", nil); err != nil {
		t.Fatalf("A, ahead of it: %v", err)
	}
}

// A person's commit on top of the branch while plans were queued: the
// compare-and-swap fails, the commit becomes the tip (nothing of the
// person's is lost), and every plan queued is stale, to be built again
// on the new end.
func TestPersonsCommitMakesTheQueueStaleAndIsAdopted(t *testing.T) {
	ctx := context.Background()
	l, g := newLander(t)
	var person string
	var once sync.Once
	g.OnUpdate = func(g *landtest.Git, ref string) {
		once.Do(func() { person = g.Push("main", "tree-person", "a person's commit") })
	}
	a := enqueue(t, l, "A", "tree-a")
	b := enqueue(t, l, "B", "tree-b")
	lb := landAsync(ctx, l, b, "feat(B)")
	_, err := l.Land(ctx, a, "feat(A)", nil)
	if !errors.Is(err, land.ErrStale) || !strings.Contains(err.Error(), "main was moved on meanwhile") {
		t.Fatalf("A: %v", err)
	}
	if _, err := lb.wait(t); !errors.Is(err, land.ErrStale) {
		t.Fatalf("B: %v", err)
	}
	if g.Tip("main") != person || l.Tip() != person {
		t.Fatalf("main at %s, the lander's tip %s; the person's commit %s", g.Tip("main"), l.Tip(), person)
	}
	if on, base, tree := l.End(); on != nil || base != person || tree != "tree-person" {
		t.Fatalf("End %v %s %s", on, base, tree)
	}
	again := enqueue(t, l, "A", "tree-a2")
	sha, err := l.Land(ctx, again, "feat(A)", nil)
	if err != nil {
		t.Fatal(err)
	}
	if c := g.Commit(sha); c.Parents[0] != person || g.Tip("main") != sha {
		t.Fatalf("landed %+v", c)
	}
	if l.Landings() != 1 {
		t.Fatalf("%d landings", l.Landings())
	}
}

// A branch rewritten under a landing (it no longer holds the tip) is put
// back, the other version kept under refs/ralph/kept/, and the plan
// lands on the tip.
func TestRewriteUnderALandingIsPutBack(t *testing.T) {
	ctx := context.Background()
	g := landtest.New()
	g.Ensure("main")
	var told []string
	l, err := land.New(ctx, g, "main", "", func(found, tip, kept string) { told = append(told, found, tip, kept) })
	if err != nil {
		t.Fatal(err)
	}
	other := g.Make("tree-other")
	var once sync.Once
	g.OnUpdate = func(g *landtest.Git, ref string) {
		once.Do(func() { g.Set("refs/heads/main", other) })
	}
	sha, err := l.Land(ctx, enqueue(t, l, "A", "tree-a"), "feat(A)", nil)
	if err != nil {
		t.Fatal(err)
	}
	kept := "refs/ralph/kept/main-" + other
	if g.Tip("main") != sha || g.Commit(sha).Parents[0] != landtest.Root || g.Ref(kept) != other {
		t.Fatalf("main at %s (landed %s), kept %s at %q", g.Tip("main"), sha, kept, g.Ref(kept))
	}
	if strings.Join(told, " ") != other+" "+landtest.Root+" "+kept {
		t.Fatalf("told %q", told)
	}
}

// At New, the newest commit ralph knows landed (known) against the branch
// as it is: commits on top of it are a person's, taken as they are; a
// branch that no longer holds it was rewritten while ralph was not
// running: put back and reported. With no callback, both are left to
// the caller, the lander starting at known.
func TestNewAgainstTheKnownTip(t *testing.T) {
	ctx := context.Background()
	setup := func() (g *landtest.Git, known, rewritten string) {
		g = landtest.New()
		known = g.Make("tree-known", landtest.Root)
		rewritten = g.Make("tree-rewritten", landtest.Root)
		g.Set("refs/heads/main", rewritten)
		return g, known, rewritten
	}
	t.Run("rewritten, put back", func(t *testing.T) {
		g, known, rewritten := setup()
		var told []string
		l, err := land.New(ctx, g, "main", known, func(found, tip, kept string) { told = append(told, found, tip, kept) })
		if err != nil {
			t.Fatal(err)
		}
		kept := "refs/ralph/kept/main-" + rewritten
		if l.Tip() != known || g.Tip("main") != known || g.Ref(kept) != rewritten {
			t.Fatalf("tip %s, main %s, kept %q", l.Tip(), g.Tip("main"), g.Ref(kept))
		}
		if strings.Join(told, " ") != rewritten+" "+known+" "+kept {
			t.Fatalf("told %q", told)
		}
		if _, base, tree := l.End(); base != known || tree != "tree-known" {
			t.Fatalf("End %s %s", base, tree)
		}
	})
	t.Run("rewritten, left to the caller", func(t *testing.T) {
		g, known, rewritten := setup()
		l, err := land.New(ctx, g, "main", known, nil)
		if err != nil {
			t.Fatal(err)
		}
		if l.Tip() != known || g.Tip("main") != rewritten || len(g.Refs()) != 1 {
			t.Fatalf("tip %s, main %s, refs %v", l.Tip(), g.Tip("main"), g.Refs())
		}
		// A landing before the caller put it back puts it back itself
		// (the other version kept) and lands on known.
		sha, err := l.Land(ctx, enqueue(t, l, "A", "tree-a"), "feat(A)", nil)
		if err != nil || g.Tip("main") != sha || g.Commit(sha).Parents[0] != known || g.Ref("refs/ralph/kept/main-"+rewritten) != rewritten {
			t.Fatalf("landed %s (%v): main %s, refs %v", sha, err, g.Tip("main"), g.Refs())
		}
	})
	t.Run("moved on by a person", func(t *testing.T) {
		g := landtest.New()
		known := g.Make("tree-known", landtest.Root)
		g.Set("refs/heads/main", known)
		person := g.Push("main", "tree-person", "a person's commit")
		l, err := land.New(ctx, g, "main", known, func(string, string, string) { t.Error("a person's commit taken for a rewrite") })
		if err != nil {
			t.Fatal(err)
		}
		if l.Tip() != person || g.Tip("main") != person {
			t.Fatalf("tip %s, main %s", l.Tip(), g.Tip("main"))
		}
	})
	t.Run("moved on, left to the caller", func(t *testing.T) {
		// Made for a judgement: commits on top of known may be the
		// agent's (the caller folds them), so the lander starts at known.
		// A person's commits stay: the landing goes stale, and the tip is
		// theirs for the judgement again.
		g := landtest.New()
		known := g.Make("tree-known", landtest.Root)
		g.Set("refs/heads/main", known)
		person := g.Push("main", "tree-person", "a person's commit")
		l, err := land.New(ctx, g, "main", known, nil)
		if err != nil {
			t.Fatal(err)
		}
		if l.Tip() != known || g.Tip("main") != person {
			t.Fatalf("tip %s, main %s", l.Tip(), g.Tip("main"))
		}
		if _, err := l.Land(ctx, enqueue(t, l, "A", "tree-a"), "feat(A)", nil); !errors.Is(err, land.ErrStale) || l.Tip() != person || g.Tip("main") != person {
			t.Fatalf("landing: %v; tip %s, main %s", err, l.Tip(), g.Tip("main"))
		}
	})
	t.Run("known is unknown", func(t *testing.T) {
		g := landtest.New()
		g.Ensure("main")
		l, err := land.New(ctx, g, "main", "c0404", func(string, string, string) { t.Error("reported") })
		if err != nil || l.Tip() != landtest.Root {
			t.Fatalf("tip %s, %v", l.Tip(), err)
		}
	})
	t.Run("no branch", func(t *testing.T) {
		if _, err := land.New(ctx, landtest.New(), "main", "", nil); err == nil || !strings.Contains(err.Error(), "reading branch main") {
			t.Fatalf("err %v", err)
		}
	})
}

// Close ends every plan queued with ErrClosed, a landing that waits
// included; nothing is queued or lands after.
func TestCloseAnswersErrClosed(t *testing.T) {
	ctx := context.Background()
	l, g := newLander(t)
	a := enqueue(t, l, "A", "tree-a")
	b := enqueue(t, l, "B", "tree-b")
	lb := landAsync(ctx, l, b, "feat(B)")
	if lb.ended() {
		t.Fatalf("B landed before A: %v", lb.err)
	}
	l.Close()
	if _, err := lb.wait(t); !errors.Is(err, land.ErrClosed) {
		t.Fatalf("the waiting B: %v", err)
	}
	if _, err := l.Land(ctx, a, "feat(A)", nil); !errors.Is(err, land.ErrClosed) {
		t.Fatalf("A: %v", err)
	}
	if _, err := l.Enqueue(land.Plan{Item: "C", Tree: "tree-c", Base: landtest.Root}); !errors.Is(err, land.ErrClosed) {
		t.Fatalf("queueing after Close: %v", err)
	}
	if g.Tip("main") != landtest.Root || l.Landings() != 0 {
		t.Fatalf("main moved to %s", g.Tip("main"))
	}
}

// A landing whose checkout could not follow still landed: the error says
// so and carries the commit.
func TestApplyFailureStillLanded(t *testing.T) {
	l, g := newLander(t)
	boom := errors.New("boom")
	sha, err := l.Land(context.Background(), enqueue(t, l, "A", "tree-a"), "feat(A)", func(context.Context, string, string) error { return boom })
	var ae *land.ApplyError
	if !errors.As(err, &ae) || !errors.Is(err, boom) || ae.Landed != sha || g.Tip("main") != sha || sha == "" {
		t.Fatalf("%s %v", sha, err)
	}
}

// Adopt makes a commit the tip (found after a crash): the plans queued on
// the old tip are stale.
func TestAdoptMakesTheQueueStale(t *testing.T) {
	ctx := context.Background()
	l, g := newLander(t)
	a := enqueue(t, l, "A", "tree-a")
	found := g.Push("main", "tree-found", "landed before the crash")
	if err := l.Adopt(ctx, found); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Land(ctx, a, "feat(A)", nil); !errors.Is(err, land.ErrStale) {
		t.Fatalf("A: %v", err)
	}
	if l.Tip() != found || !l.Made(found) {
		t.Fatalf("tip %s", l.Tip())
	}
	if err := l.Adopt(ctx, "c0404"); err == nil {
		t.Fatal("adopted a commit that does not exist")
	}
}

// Workers that build on the end at once take turns (Build): each plan is
// built on the one queued before it, and none goes stale however many
// build together; release may be called twice.
func TestBuildersTakeTurns(t *testing.T) {
	l, _ := newLander(t)
	const workers = 16
	stale := make(chan error, workers)
	var wg sync.WaitGroup
	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			release := l.Build()
			defer release()
			on, base, _ := l.End()
			time.Sleep(time.Millisecond) // the build: another worker would queue meanwhile
			_, err := l.Enqueue(land.Plan{Item: fmt.Sprint(i), Tree: fmt.Sprint("tree-", i), On: on, Base: base})
			release()
			stale <- err
		}(i)
	}
	wg.Wait()
	close(stale)
	for err := range stale {
		if err != nil {
			t.Fatalf("a builder's plan went stale: %v", err)
		}
	}
	if on, _, _ := l.End(); l.Ahead(on) != workers-1 {
		t.Fatalf("%d plans ahead of the last, want %d", l.Ahead(on), workers-1)
	}
}
