// Package land is the lander: the one owner of the branch a run's work
// lands on. A worker builds a candidate tree on the end of the queue (a
// snapshot: the tip, or the tree of the last plan queued), the judge runs
// the gates on exactly that tree, and the lander takes what still fits —
// the plan was built on the tip, or on a plan ahead of it that landed as
// judged — or answers "stale", and the worker builds and judges again on
// the new end. This is the shape of nomad's plan applier, with Zuul's
// speculative queue: stories that finish together are judged together,
// each on top of the ones ahead, and each story's gates run once.
//
// Every move of the branch is made by the lander, one at a time, as a
// compare-and-swap of its ref to a commit of exactly the judged tree on
// the commit it was built on: a tree nobody judged never lands, and a
// person's commit made meanwhile is never lost (it makes the queue stale,
// not the branch).
package land

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Git is what the lander needs of the repository.
type Git interface {
	// UpdateRef moves ref to newSHA only if it is at oldSHA.
	UpdateRef(ctx context.Context, ref, newSHA, oldSHA, why string) error
	RevParse(ctx context.Context, rev string) (string, error)
	TreeOf(ctx context.Context, rev string) (string, error)
	IsAncestor(ctx context.Context, a, b string) bool
	// CommitTreeMsg makes a commit object (no ref moves).
	CommitTreeMsg(ctx context.Context, tree string, parents []string, msg string) (string, error)
}

// Plan is a candidate for the branch: an item's tree, built on the end
// of the queue as End gave it.
type Plan struct {
	Item string
	Tree string
	// On is the plan it was built on; nil: the tip, Base.
	On   *Ticket
	Base string
	// Commit is a commit object of Tree on what it was built on, for git
	// to merge later work onto (not what lands: that commit carries the
	// verdict in its message).
	Commit string
}

// Apply runs right after the branch moved from old to the landed commit,
// before anything else moves it: a checkout of the branch follows.
type Apply func(ctx context.Context, old, landed string) error

// ErrStale: the plan no longer fits (what it was built on did not land,
// or the branch was moved by someone else), and must be built and judged
// again on End.
var ErrStale = errors.New("stale: the branch moved on")

// ErrClosed: the run is ending; nothing more lands.
var ErrClosed = errors.New("the lander is closed")

// Ticket is a plan's place in the queue.
type Ticket struct {
	plan  Plan
	state int // queued, asked (to land), landed, gone
	msg   string
	apply Apply
	done  chan struct{}
	sha   string
	err   error
}

// Plan is the plan the ticket holds.
func (t *Ticket) Plan() Plan { return t.plan }

// Stale reports whether t left the queue because what it was built on
// did not land (or the branch was moved by someone else): its tree can
// never land.
func (t *Ticket) Stale() bool {
	select {
	case <-t.done:
		return errors.Is(t.err, ErrStale)
	default:
		return false
	}
}

const (
	queued = iota
	asked
	landed
	gone
)

// Lander owns one branch.
type Lander struct {
	ref string // refs/heads/<branch>
	git Git

	// building is held by the one worker building a plan on the end of
	// the queue (Build), from End until Enqueue: builders take turns, so
	// a plan goes stale only when the queue shrinks or someone else moves
	// the branch, never because another worker queued first.
	building sync.Mutex
	mu       sync.Mutex
	tip      string
	tipTree  string
	queue    []*Ticket // accepted, not landed or gone, in order
	closed   bool
	// Rewritten, when set, is told when the branch was found rewritten
	// (it no longer holds tip) and put back to tip: the other version is
	// kept under kept.
	Rewritten func(found, tip, kept string)
	// landings counts the moves of the branch; made are the commits it
	// moved it to (a ref check tells them from an agent's).
	landings int
	made     map[string]bool
}

// New returns the lander of branch (a short name). known is the newest
// commit ralph knows landed there ("" none: the branch as it is): a
// branch that moved on from it (a person's commits) is taken as it is,
// one that no longer holds it (rewritten while ralph was not running) is
// put back, its other version kept under refs/ralph/kept/ (rewritten
// says so). With no rewritten, the lander starts at known and leaves the
// branch, moved on or rewritten, to the caller's checks: they fold an
// agent's commits into its item, keep a person's (the landing then goes
// stale and is judged again on them) and put a rewrite back.
func New(ctx context.Context, g Git, branch, known string, rewritten func(found, tip, kept string)) (*Lander, error) {
	l := &Lander{ref: "refs/heads/" + branch, git: g, Rewritten: rewritten}
	cur, err := g.RevParse(ctx, l.ref)
	if err != nil {
		return nil, fmt.Errorf("reading branch %s: %w", branch, err)
	}
	tip := cur
	if known != "" && known != cur {
		switch _, kerr := g.RevParse(ctx, known); {
		case kerr != nil:
		case rewritten == nil:
			// Commits on top of known may be an agent's, made in an
			// earlier process (the Stop hook's session, a resume while
			// judging): the caller's checks tell them from a person's.
			tip = known
		case g.IsAncestor(ctx, known, cur):
		default:
			if err := l.putBack(ctx, known, cur); err != nil {
				return nil, err
			}
			tip = known
		}
	}
	tree, err := g.TreeOf(ctx, tip)
	if err != nil {
		return nil, fmt.Errorf("reading the tree of %s: %w", short(tip), err)
	}
	l.tip, l.tipTree = tip, tree
	return l, nil
}

// putBack moves the branch from found (a version that dropped tip) back
// to tip, keeping found under refs/ralph/kept/.
func (l *Lander) putBack(ctx context.Context, tip, found string) error {
	kept := "refs/ralph/kept/" + l.Branch() + "-" + short(found)
	_ = l.git.UpdateRef(ctx, kept, found, "", "ralph: keep a rewritten "+l.Branch())
	if err := l.git.UpdateRef(ctx, l.ref, tip, found, "ralph: put back "+l.Branch()); err != nil {
		return fmt.Errorf("putting %s back to %s: %w", l.Branch(), short(tip), err)
	}
	if l.Rewritten != nil {
		l.Rewritten(found, tip, kept)
	}
	return nil
}

// Branch is the branch the lander owns (its short name).
func (l *Lander) Branch() string { return l.ref[len("refs/heads/"):] }

// Tip is the branch's commit as the lander last knew it.
func (l *Lander) Tip() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.tip
}

// End is what a new candidate is built on: the last plan queued (its
// ticket and tree), else the tip (no ticket, the tip's commit and tree).
func (l *Lander) End() (on *Ticket, base, tree string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := len(l.queue); n > 0 {
		t := l.queue[n-1]
		return t, "", t.plan.Tree
	}
	return nil, l.tip, l.tipTree
}

// Build takes the turn to build a plan on the end of the queue (End,
// then Enqueue); the returned release gives it up (it may be called more
// than once). Nothing else waits on it: landing goes on meanwhile.
func (l *Lander) Build() (release func()) {
	l.building.Lock()
	var once sync.Once
	return func() { once.Do(l.building.Unlock) }
}

// Wait returns when t landed or left the queue.
func (l *Lander) Wait(ctx context.Context, t *Ticket) {
	select {
	case <-t.done:
	case <-ctx.Done():
	}
}

// Ahead counts the plans queued before t.
func (l *Lander) Ahead(t *Ticket) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, q := range l.queue {
		if q == t {
			return i
		}
	}
	return 0
}

// Enqueue accepts p at the end of the queue when it was built on the
// end; otherwise ErrStale (build again on End).
func (l *Lander) Enqueue(p Plan) (*Ticket, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, ErrClosed
	}
	n := len(l.queue)
	switch {
	case n > 0 && p.On != l.queue[n-1]:
		return nil, ErrStale
	case n == 0 && (p.On != nil || p.Base != l.tip):
		return nil, ErrStale
	}
	t := &Ticket{plan: p, done: make(chan struct{})}
	l.queue = append(l.queue, t)
	return t, nil
}

// Withdraw takes t out of the queue (its judgement failed, or a decider
// holds it): the plans built on it answer stale.
func (l *Lander) Withdraw(t *Ticket) {
	if t == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.drop(t, ErrStale)
	l.settle(context.Background())
}

// drop ends t with err, and every plan queued after it: each was built
// on it (directly or not), so none can land, and the end of the queue is
// what is left before it. Called with mu held.
func (l *Lander) drop(t *Ticket, err error) {
	if t.state == landed || t.state == gone {
		return
	}
	doomed := []*Ticket{t}
	for i, q := range l.queue {
		if q == t {
			doomed = append(doomed, l.queue[i+1:]...)
			l.queue = l.queue[:i:i]
			break
		}
	}
	for _, d := range doomed {
		d.end(err)
	}
}

// end marks a ticket gone with err. Called with mu held.
func (t *Ticket) end(err error) {
	t.state, t.err = gone, err
	close(t.done)
}

// Land lands t once the plans ahead of it landed: the branch moves to a
// commit of exactly t's tree, with message msg, on the commit t was built
// on; apply (optional) runs before anything else moves the branch. It
// returns the commit, or ErrStale when what t was built on did not land.
func (l *Lander) Land(ctx context.Context, t *Ticket, msg string, apply Apply) (string, error) {
	l.mu.Lock()
	if t.state == queued {
		t.state, t.msg, t.apply = asked, msg, apply
		l.settle(ctx)
	}
	l.mu.Unlock()
	select {
	case <-t.done:
		return t.sha, t.err
	case <-ctx.Done():
		l.Withdraw(t)
		<-t.done
		return t.sha, t.err
	}
}

// settle lands, in queue order, every plan asked to land whose base is
// the tip, and ends those that can never land. Called with mu held: the
// branch moves one landing at a time.
func (l *Lander) settle(ctx context.Context) {
	for len(l.queue) > 0 {
		t := l.queue[0]
		if t.plan.On != nil && t.plan.On.state != landed {
			// Built on a plan that did not land (it went while t waited).
			l.drop(t, ErrStale)
			continue
		}
		base := t.plan.Base
		if t.plan.On != nil {
			base = t.plan.On.sha
		}
		if base != l.tip {
			l.drop(t, ErrStale)
			continue
		}
		if t.state != asked {
			return // first in line, still being judged
		}
		l.land(ctx, t, base)
	}
}

// land moves the branch to a commit of t's tree on base (the tip).
// Called with mu held.
func (l *Lander) land(ctx context.Context, t *Ticket, base string) {
	ctx = context.WithoutCancel(ctx)
	sha, err := l.git.CommitTreeMsg(ctx, t.plan.Tree, []string{base}, t.msg)
	if err == nil {
		err = l.git.UpdateRef(ctx, l.ref, sha, base, "ralph: "+t.plan.Item)
		if err != nil {
			// Someone else moved the branch. Commits on top of the tip (a
			// person's) become the tip, and every plan built on the old
			// one is stale; a version that dropped the tip is put back
			// and the landing tried again.
			now, rerr := l.git.RevParse(ctx, l.ref)
			switch {
			case rerr != nil || now == base:
			case l.git.IsAncestor(ctx, base, now):
				if tree, terr := l.git.TreeOf(ctx, now); terr == nil {
					l.tip, l.tipTree = now, tree
				}
				err = fmt.Errorf("%w (%s was moved on meanwhile)", ErrStale, l.Branch())
			default:
				if perr := l.putBack(ctx, base, now); perr == nil {
					err = l.git.UpdateRef(ctx, l.ref, sha, base, "ralph: "+t.plan.Item)
				}
			}
		}
	}
	if err != nil {
		if !errors.Is(err, ErrStale) {
			err = fmt.Errorf("%w (%v)", ErrStale, err)
		}
		l.drop(t, err)
		return
	}
	l.tip, l.tipTree = sha, t.plan.Tree
	l.landings++
	if l.made == nil {
		l.made = map[string]bool{}
	}
	l.made[sha] = true
	l.queue = l.queue[1:]
	t.state, t.sha = landed, sha
	if t.apply != nil {
		if aerr := t.apply(ctx, base, sha); aerr != nil {
			t.err = &ApplyError{Landed: sha, Err: aerr}
		}
	}
	close(t.done)
}

// ApplyError: the plan landed, but what follows the branch failed.
type ApplyError struct {
	Landed string
	Err    error
}

func (e *ApplyError) Error() string {
	return fmt.Sprintf("landed %s, but bringing the checkout along failed: %v", short(e.Landed), e.Err)
}

func (e *ApplyError) Unwrap() error { return e.Err }

// Adopt makes sha the tip (a commit found after a crash, or the branch
// as a person left it between runs). Plans queued become stale.
func (l *Lander) Adopt(ctx context.Context, sha string) error {
	tree, err := l.git.TreeOf(ctx, sha)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.tip, l.tipTree = sha, tree
	l.settle(ctx)
	return nil
}

// Made reports whether the lander moved the branch to sha, or sha is
// the tip it knows.
func (l *Lander) Made(sha string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return sha == l.tip || l.made[sha]
}

// Landings counts the branch's moves by this lander.
func (l *Lander) Landings() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.landings
}

// Close ends every plan still queued with ErrClosed; nothing lands after.
func (l *Lander) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	for len(l.queue) > 0 {
		l.drop(l.queue[0], ErrClosed)
	}
}

func short(sha string) string {
	if len(sha) > 8 {
		return sha[:8]
	}
	return sha
}
