package engine

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/ralph-loop/ralph/internal/gate"
	"github.com/ralph-loop/ralph/internal/judge"
	"github.com/ralph-loop/ralph/internal/land"
	"github.com/ralph-loop/ralph/internal/land/landtest"
)

// fakeJudge is an engine.Judge whose verdicts are scripted per judging,
// over real landers (land.Lander) of an in-memory repository: a verdict
// that passed takes its place in the queue as the real judge's does, so
// landings, stale answers and conflicts come from the lander.
//
// Without a script it judges as the real one does in outline: the
// source's refusal fails, no claim fails with the source's Unclaimed
// verdict, a claim passes.
type fakeJudge struct {
	git *landtest.Git
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

func newFakeJudge() *fakeJudge { return &fakeJudge{git: landtest.New()} }

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

func (j *fakeJudge) Open(context.Context, string, string, []gate.Gate, io.Writer) (judge.Opened, error) {
	return judge.Opened{Red: j.red}, nil
}

func (j *fakeJudge) Begin(_ context.Context, item, base string, terms judge.Claim) (*judge.Contract, map[string]string) {
	j.log("begin " + item)
	return &judge.Contract{Item: item, Base: base}, j.git.Refs()
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
	j.git.Ensure(branch)
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
