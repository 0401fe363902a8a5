package judge

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/ralph-loop/ralph/internal/gate"
)

// gatesStep runs the gates — the run-wide ones, then the item's checks —
// on a fresh checkout of exactly the tree that lands, with the
// dependency folders the base had and caches the agent never wrote; and
// asks the item's own condition (a pipeline stage's) there. A gate that
// failed at the item's base too is not the item's doing: its tests that
// failed there may still fail (listed as still red, never called
// passed), but nothing may fail that did not, and the gates after it
// still run.
type gatesStep struct{}

func (gatesStep) Name() string { return "gates on the commit" }
func (gatesStep) Stage() Stage { return Gates }

func (gatesStep) Check(ctx context.Context, j *Judge, c *Case) Finding {
	gates := append(append([]gate.Gate{}, c.Claim.Gates...), c.Claim.Checks...)
	if len(gates) == 0 && c.Claim.Condition == nil {
		return Finding{Skipped: true}
	}
	if c.tree == "" {
		return Finding{Fail: fail("nothing recorded to judge", "The work was not recorded.")}
	}
	if p := c.prior; p != nil && p.tree == c.tree {
		// Built anew on the branch as it is now, the work is the very tree
		// already judged: its results stand.
		c.results, c.base, c.stillRed, c.met, c.judgedBy = p.results, p.base, p.stillRed, p.met, p.judgedBy
		fmt.Fprintf(c.log(), "ralph: %s is the same tree (%s) as judged before: its gates' results stand\n", c.Item, short(c.tree))
		return Finding{}
	}
	if len(c.Claim.Gates) > 0 {
		c.base = j.Baseline.At(ctx, c.Base, c.Log)
	}
	if a, ok := j.attestation(ctx, c, gates); ok && c.Claim.Condition == nil {
		f, complete := c.judgeGates(gates, func(i int, _ gate.Gate) (gate.Result, bool) {
			if i < len(a.Results) {
				return a.Results[i], true
			}
			return gate.Result{}, false
		})
		if complete {
			c.judgedBy = a.By
			fmt.Fprintf(c.log(), "\n%s\n", attestedNote(c.Item, a.By, a.Tree, c.results))
			c.noteInventory()
			return f
		}
		// A gate red at the base too, after which the worker ran no more:
		// the rest is not attested, and all of them run here.
		c.results, c.stillRed = nil, nil
		fmt.Fprintf(c.log(), "ralph: %s stopped at a gate red at the base too: the gates run here\n", a.By)
	}
	co, err := j.Trees.Acquire(ctx, c.tree)
	if err != nil {
		return Finding{Fail: fail("could not check out the work for the gates", err.Error())}
	}
	defer j.Trees.Release(co)
	fmt.Fprintf(c.log(), "\nralph: the gates run on a fresh checkout of the tree that lands (%s)\n", short(c.tree))
	gctx, dir, done := j.view(ctx, co.Dir)
	defer done()
	c.judgedBy = j.Here
	f, _ := c.judgeGates(gates, func(_ int, g gate.Gate) (gate.Result, bool) {
		rs, _ := j.Gates.Run(gctx, dir, []gate.Gate{g}, c.log())
		if len(rs) == 0 {
			return gate.Result{}, false
		}
		return rs[0], true
	})
	if f.Fail != nil {
		return f
	}
	if c.Claim.Condition != nil {
		met, detail, failure := c.Claim.Condition(gctx, co.Dir)
		if !met {
			f.Fail = &Verdict{Claimed: true, Summary: "exit condition not met: " + firstLine(detail), Failure: failure}
			return f
		}
		c.met = firstLine(detail)
	}
	c.noteInventory()
	return f
}

// judgeGates judges the gates' results in order, each from result (false:
// there is none): a gate that fails fails the claim unless it failed at
// the item's base too and nothing new fails in it. complete says every
// gate was judged or one failed the claim.
func (c *Case) judgeGates(gates []gate.Gate, result func(i int, g gate.Gate) (gate.Result, bool)) (f Finding, complete bool) {
	for i, g := range gates {
		r, ok := result(i, g)
		if !ok {
			return f, false
		}
		c.results = append(c.results, r)
		if r.Passed {
			continue
		}
		isCheck := i >= len(c.Claim.Gates)
		var at *gate.Result
		if !isCheck {
			at = resultOf(c.base, r)
		}
		red, why := againstBase(r, at)
		if why != "" {
			failure := "You claimed completion, but the harness's checks failed on the commit:\n\n"
			if c.tree != c.own {
				c.onAhead = c.ticket != nil && c.ticket.Plan().On != nil
				why = "integrated gates failed: " + why
				failure = "Your work was judged merged onto " + c.Claim.Target + " as it is now (work that landed there since you started is in it), and the checks failed there; bring your work in line with it:\n\n"
			}
			f.Fail = &Verdict{Claimed: true, Summary: why, Failure: failure + gate.FailureContext([]gate.Result{r}, 4<<10)}
			return f, true
		}
		c.stillRed = append(c.stillRed, red...)
	}
	return f, true
}

// noteInventory notes the gates that named no tests.
func (c *Case) noteInventory() {
	// The run-wide gates' inventory is what every item is held to; a
	// story's check answers by its exit code (a `| grep -q` is fine).
	for _, name := range gate.NoInventory(c.results[:min(len(c.results), len(c.Claim.Gates))]) {
		c.notes = append(c.notes, "no test inventory for gate "+name)
	}
}

// resultOf is gate r's result among results (the base's), or nil.
func resultOf(results []gate.Result, r gate.Result) *gate.Result {
	for i := range results {
		if results[i].Name == r.Name && results[i].Command == r.Command {
			return &results[i]
		}
	}
	return nil
}

// againstBase judges a failed gate against its result at the base (nil:
// it passed there, or is the item's own check): why it fails the claim
// ("" when it does not), and what is still red since the base.
func againstBase(r gate.Result, base *gate.Result) (stillRed []TestRef, why string) {
	if base == nil || base.Passed {
		return nil, gate.Summary([]gate.Result{r})
	}
	if r.Tests != nil && r.Tests.PerTest && base.Tests != nil && base.Tests.PerTest {
		var newRed, red []string
		for name, o := range r.Tests.Names {
			if o != gate.Fail {
				continue
			}
			if base.Tests.Names[name] == gate.Fail {
				red = append(red, name)
			} else {
				newRed = append(newRed, name)
			}
		}
		slices.Sort(newRed)
		slices.Sort(red)
		switch {
		case len(newRed) > 0:
			return nil, fmt.Sprintf("gate %s: tests fail that did not at the base: %s", r.Name, list(newRed, 5))
		case len(red) == 0:
			return nil, fmt.Sprintf("gate %s fails, and not on the tests that failed at the base (%s)", r.Name, lastLine(strings.TrimSpace(r.Output)))
		}
		for _, n := range red {
			stillRed = append(stillRed, TestRef{Gate: r.Name, Test: n})
		}
		return stillRed, ""
	}
	if added := newFindings(base.Output, r.Output); len(added) > 0 {
		return nil, fmt.Sprintf("gate %s: new findings since the base: %s", r.Name, list(added, 3))
	}
	return []TestRef{{Gate: r.Name}}, ""
}

var digits = regexp.MustCompile(`[0-9]+`)

// newFindings are the lines of now's output that the base's output does
// not have, numbers aside (line and column numbers move with any edit):
// what a gate without a test inventory (a linter, a typechecker) found
// that it did not at the base.
func newFindings(base, now string) []string {
	seen := map[string]bool{}
	for _, l := range strings.Split(base, "\n") {
		seen[digits.ReplaceAllString(strings.TrimSpace(l), "N")] = true
	}
	var out []string
	for _, l := range strings.Split(now, "\n") {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "===") || seen[digits.ReplaceAllString(t, "N")] {
			continue
		}
		out = append(out, t)
	}
	return out
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return strings.TrimRight(s[:i], ":")
	}
	return s
}
