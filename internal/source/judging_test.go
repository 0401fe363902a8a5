package source

import (
	"context"
	"io"
	"path/filepath"
	"testing"

	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/gate"
	"github.com/ralph-loop/ralph/internal/git"
	"github.com/ralph-loop/ralph/internal/judge"
	"github.com/ralph-loop/ralph/internal/land"
	"github.com/ralph-loop/ralph/internal/proc"
)

// judging drives the run's one judge over a source as the engine does:
// Begin pins an item's contract before its agent works, Judge judges the
// attempt, and a verdict that passed lands through the branch's lander,
// the workspace's checkout following, the source and the judge told.
type judging struct {
	t       *testing.T
	ctx     context.Context
	j       *judge.Judge
	src     engine.Source
	st      *engine.State
	landers map[string]*land.Lander
	begun   map[string]begun
	// quiet: a landing is told to nobody (the process dies right after).
	quiet bool
}

// begun is what Begin took of an item.
type begun struct {
	ws   engine.Workspace
	base string
	refs map[string]string
}

func newJudging(t *testing.T, repo *git.Repo, src engine.Source, st *engine.State) *judging {
	t.Helper()
	ctx := context.Background()
	j, err := judge.New(repo, gate.Runner{Proc: proc.Exec{}}, filepath.Join(repo.Dir, ".ralph"))
	if err != nil {
		t.Fatal(err)
	}
	// A story with no check in a PRD with no gate passes on its real
	// work, as in a run the person started with --no-gates; one with
	// checks needs their evidence.
	j.NoGates = true
	// The run-wide gates are taken on the base first, as the engine does.
	var rev string
	var gates []gate.Gate
	if b, ok := src.(interface {
		BaselineGates(context.Context) (string, []gate.Gate)
	}); ok {
		rev, gates = b.BaselineGates(ctx)
	}
	if _, err := j.Open(ctx, st.RunID, rev, gates, io.Discard); err != nil {
		t.Fatal(err)
	}
	return &judging{t: t, ctx: ctx, j: j, src: src, st: st, landers: map[string]*land.Lander{}, begun: map[string]begun{}}
}

// lander is the owner of branch, made once (at known, the newest commit
// the source knows landed there).
func (g *judging) lander(branch, known string) *land.Lander {
	g.t.Helper()
	if l := g.landers[branch]; l != nil {
		return l
	}
	l, err := g.j.Lander(g.ctx, branch, known, func(string) {})
	if err != nil {
		g.t.Fatal(err)
	}
	g.landers[branch] = l
	return l
}

// prepare readies it's tree (Source.Prepare) and pins its contract at
// its base, before its agent works.
func (g *judging) prepare(it *engine.Item) engine.Workspace {
	g.t.Helper()
	ws, err := g.src.Prepare(g.ctx, it, g.st)
	if err != nil {
		g.t.Fatal(err)
	}
	terms := g.src.Terms(it, g.st)
	g.lander(terms.Target, terms.Tip)
	// The item's base is taken once, before its first iteration, and kept
	// in its record until it passes.
	is := g.st.Item(it.ID)
	base := is.BaseHead
	if base == "" {
		base = ws.Base
	}
	if base == "" {
		if base, err = g.j.Repo.At(ws.Dir).Head(g.ctx); err != nil {
			g.t.Fatal(err)
		}
	}
	is.BaseHead = base
	_, refs := g.j.Begin(g.ctx, it.ID, base, terms)
	g.begun[it.ID] = begun{ws: ws, base: base, refs: refs}
	return ws
}

// judge judges a (prepared) and lands it when it passed: the verdict and
// the commit ("" when nothing landed).
func (g *judging) judge(a *engine.Attempt) (engine.Verdict, string) {
	g.t.Helper()
	b, ok := g.begun[a.Item.ID]
	if !ok {
		g.t.Fatalf("%s was judged before it was prepared", a.Item.ID)
	}
	terms := g.src.Terms(a.Item, g.st)
	l := g.lander(terms.Target, terms.Tip)
	c := &judge.Case{Item: a.Item.ID, Title: a.Item.Title, Kind: a.Item.Kind, Iteration: 1, Attempt: 1, RunID: g.st.RunID,
		Dir: a.Dir, Base: b.base, Claimed: a.Claimed, Preexisting: g.st.Preexisting, RefsBefore: b.refs, Learnings: a.Learnings,
		Claim: terms, Lander: l}
	c.Read = func(ctx context.Context) judge.Claim { return g.src.Claim(ctx, a, g.st) }
	if a.Result.Failed() {
		v := judge.AgentFailure(a.Result)
		c.AgentFailed = &v
	}
	v := g.j.Judge(g.ctx, c)
	if !v.Passed {
		if told, ok := g.src.(interface {
			NotPassed(context.Context, *engine.Attempt, engine.Verdict)
		}); ok {
			told.NotPassed(g.ctx, a, v)
		}
		return v, ""
	}
	sha := ""
	if v.Ticket != nil {
		var err error
		sha, err = l.Land(g.ctx, v.Ticket, v.Message, func(ctx context.Context, old, landed string) error {
			if b.ws.Follow == nil {
				return nil
			}
			return b.ws.Follow(ctx, v, old, landed)
		})
		if err != nil {
			g.t.Fatalf("landing %s: %v", a.Item.ID, err)
		}
		if g.quiet {
			return v, sha
		}
		g.j.Landed(a.Item.ID, v, sha)
	}
	if v.Files != nil {
		a.Files = v.Files
	}
	if err := g.src.Landed(g.ctx, a, v, sha, g.st); err != nil {
		g.t.Fatalf("after %s landed: %v", a.Item.ID, err)
	}
	g.st.Item(a.Item.ID).BaseHead = ""
	delete(g.begun, a.Item.ID)
	return v, sha
}
