package engine

import (
	"context"
	"fmt"
	"io"
	"maps"
	"strings"
	"sync"

	"github.com/ralph-loop/ralph/internal/gate"
	"github.com/ralph-loop/ralph/internal/judge"
	"github.com/ralph-loop/ralph/internal/land"
)

// memGit is a repository in memory for the lander (land.Git): commits,
// their trees and the refs. Every branch starts at the commit "root".
// onUpdate, when set, runs before each compare-and-swap of a branch: a
// test moves the branch there as a person would.
type memGit struct {
	mu       sync.Mutex
	refs     map[string]string
	commits  map[string]memCommit
	n        int
	onUpdate func(g *memGit, ref string)
}

type memCommit struct {
	tree    string
	parents []string
	msg     string
}

func newMemGit() *memGit {
	return &memGit{refs: map[string]string{}, commits: map[string]memCommit{"root": {tree: "tree-root"}}}
}

// ensure makes branch (at root) if it does not exist.
func (g *memGit) ensure(branch string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.refs["refs/heads/"+branch]; !ok {
		g.refs["refs/heads/"+branch] = "root"
	}
}

// tip is the commit branch is at.
func (g *memGit) tip(branch string) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.refs["refs/heads/"+branch]
}

// commit is the commit sha, as it was made.
func (g *memGit) commit(sha string) memCommit {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.commits[sha]
}

// push makes a commit of tree on branch's tip and moves the branch there,
// as a person's commit would (no compare-and-swap of the lander's).
func (g *memGit) push(branch, tree, msg string) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	ref := "refs/heads/" + branch
	sha := g.newCommitLocked(tree, []string{g.refs[ref]}, msg)
	g.refs[ref] = sha
	return sha
}

func (g *memGit) newCommitLocked(tree string, parents []string, msg string) string {
	g.n++
	sha := fmt.Sprintf("c%04d", g.n)
	g.commits[sha] = memCommit{tree: tree, parents: parents, msg: msg}
	return sha
}

func (g *memGit) UpdateRef(_ context.Context, ref, newSHA, oldSHA, _ string) error {
	if hook := g.onUpdate; hook != nil && strings.HasPrefix(ref, "refs/heads/") {
		hook(g, ref)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if cur := g.refs[ref]; cur != oldSHA {
		return fmt.Errorf("cannot lock ref %s: is at %s but expected %s", ref, cur, oldSHA)
	}
	if _, ok := g.commits[newSHA]; !ok {
		return fmt.Errorf("no commit %s", newSHA)
	}
	g.refs[ref] = newSHA
	return nil
}

func (g *memGit) RevParse(_ context.Context, rev string) (string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if sha, ok := g.refs[rev]; ok {
		return sha, nil
	}
	if _, ok := g.commits[rev]; ok {
		return rev, nil
	}
	return "", fmt.Errorf("unknown revision %s", rev)
}

func (g *memGit) TreeOf(ctx context.Context, rev string) (string, error) {
	sha, err := g.RevParse(ctx, rev)
	if err != nil {
		return "", err
	}
	return g.commit(sha).tree, nil
}

func (g *memGit) IsAncestor(_ context.Context, a, b string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for todo := []string{b}; len(todo) > 0; {
		c := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if c == a {
			return true
		}
		todo = append(todo, g.commits[c].parents...)
	}
	return false
}

func (g *memGit) CommitTreeMsg(_ context.Context, tree string, parents []string, msg string) (string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, p := range parents {
		if _, ok := g.commits[p]; !ok {
			return "", fmt.Errorf("no commit %s", p)
		}
	}
	return g.newCommitLocked(tree, parents, msg), nil
}

// fakeJudge is an engine.Judge whose verdicts are scripted per judging,
// over real landers (land.Lander) of an in-memory repository: a verdict
// that passed takes its place in the queue as the real judge's does, so
// landings, stale answers and conflicts come from the lander.
//
// Without a script it judges as the real one does in outline: the
// source's refusal fails, no claim fails with the source's Unclaimed
// verdict, a claim passes.
type fakeJudge struct {
	git *memGit
	// verdict scripts the n-th judging of an item (1-based; Judge, Rejudge
	// and a resolver's judging alike); ok false: as without a script.
	verdict func(c *judge.Case, n int) (v Verdict, ok bool)
	// files, when set, are the paths a passing verdict lists as changed.
	files func(item string) []string
	red   []string // what Open reports red at the base

	mu      sync.Mutex
	calls   []string
	n       map[string]int
	claims  []judgedClaim
	landed  map[string]string // item → sha, as Landed was told
	records []string          // RecordWork messages that landed
}

// judgedClaim is what a judging was asked.
type judgedClaim struct {
	Item    string
	Claimed bool // the promise or the source's own signal
	Base    string
	Role    string
	Rejudge bool
}

func newFakeJudge() *fakeJudge { return &fakeJudge{git: newMemGit()} }

func (j *fakeJudge) log(call string) {
	j.mu.Lock()
	j.calls = append(j.calls, call)
	j.mu.Unlock()
}

// callLog is every call, in order.
func (j *fakeJudge) callLog() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return strings.Join(j.calls, ", ")
}

func (j *fakeJudge) Open(context.Context, string, string, []gate.Gate, io.Writer) ([]string, error) {
	return j.red, nil
}

func (j *fakeJudge) Begin(_ context.Context, item, base string, terms judge.Claim) (*judge.Contract, map[string]string) {
	j.log("begin " + item)
	j.git.mu.Lock()
	refs := maps.Clone(j.git.refs)
	j.git.mu.Unlock()
	return &judge.Contract{Item: item, Base: base}, refs
}

func (j *fakeJudge) Judge(ctx context.Context, c *judge.Case) Verdict { return j.judge(ctx, c, false) }

func (j *fakeJudge) Rejudge(ctx context.Context, c *judge.Case) Verdict { return j.judge(ctx, c, true) }

func (j *fakeJudge) judge(ctx context.Context, c *judge.Case, again bool) Verdict {
	if c.Read != nil {
		c.Claim = c.Read(ctx)
		c.Read = nil
	}
	j.mu.Lock()
	if j.n == nil {
		j.n = map[string]int{}
	}
	j.n[c.Item]++
	n := j.n[c.Item]
	claimed := c.Claimed || c.Claim.Claimed || c.Approved
	j.claims = append(j.claims, judgedClaim{Item: c.Item, Claimed: claimed, Base: c.Base, Role: c.Role, Rejudge: again})
	what := "judge "
	if again {
		what = "rejudge "
	}
	j.calls = append(j.calls, what+c.Item)
	j.mu.Unlock()

	v, ok := Verdict{}, false
	if j.verdict != nil {
		v, ok = j.verdict(c, n)
	}
	if !ok {
		switch {
		case c.AgentFailed != nil:
			v = *c.AgentFailed
		case c.Rejected != "":
			v = judge.Rejection(c.Role, c.Rejected)
		case c.Claim.Refused != nil:
			v = *c.Claim.Refused
		case !claimed:
			v = c.Claim.Unclaimed
			if v.Summary == "" {
				v = Verdict{Summary: "no claim", Failure: "claim it"}
			}
		default:
			v = Verdict{Passed: true, Claimed: true, Summary: "gates ok"}
		}
	}
	v.Tampered = append(c.Claim.Tampered, v.Tampered...)
	if !v.Passed || c.Lander == nil {
		return v
	}
	// The work's tree, built on the end of the queue, takes its place.
	on, base, _ := c.Lander.End()
	tree := fmt.Sprintf("tree-%s-%d", c.Item, n)
	t, err := c.Lander.Enqueue(land.Plan{Item: c.Item, Tree: tree, On: on, Base: base})
	if err != nil {
		return Verdict{Claimed: true, Summary: "could not queue the work", Failure: err.Error()}
	}
	v.Tree, v.Ticket = tree, t
	v.Message = c.Claim.Subject + "\n\n- Verified by ralph: " + v.Summary + "\n"
	if j.files != nil {
		v.Files = j.files(c.Item)
	}
	return v
}

// RecordWork lands the work unverified, as the real judge does: a plan
// on the tip, landed at once.
func (j *fakeJudge) RecordWork(ctx context.Context, c *judge.Case, msg string) (string, error) {
	if c.Lander == nil {
		return "", nil
	}
	j.mu.Lock()
	j.calls = append(j.calls, "record "+c.Item)
	n := len(j.records) + 1
	j.mu.Unlock()
	t, err := c.Lander.Enqueue(land.Plan{Item: c.Item, Tree: fmt.Sprintf("work-%s-%d", c.Item, n), Base: c.Lander.Tip()})
	if err != nil {
		return "", err
	}
	sha, err := c.Lander.Land(ctx, t, msg, nil)
	if err == nil {
		j.mu.Lock()
		j.records = append(j.records, msg)
		j.mu.Unlock()
	}
	return sha, err
}

func (j *fakeJudge) Lander(ctx context.Context, branch, known string, report func(string)) (*land.Lander, error) {
	j.git.ensure(branch)
	var rewritten func(found, tip, kept string)
	if report != nil {
		rewritten = func(found, tip, kept string) {
			report(fmt.Sprintf("%s was rewritten; restored to %s, the other version kept as %s", branch, tip, kept))
		}
	}
	return land.New(ctx, j.git, branch, known, rewritten)
}

func (j *fakeJudge) Landed(item string, v Verdict, sha string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.landed == nil {
		j.landed = map[string]string{}
	}
	j.landed[item] = sha
	j.calls = append(j.calls, "landed "+item)
}

// judged are the claims judged, in order.
func (j *fakeJudge) judged() []judgedClaim {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]judgedClaim(nil), j.claims...)
}
