package judge

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/ralph-loop/ralph/internal/gate"
)

// evidenceCheck: a claim passes only with evidence for this item —
// something that failed at its base passes now (one of its checks, a
// test, a gate), or a test the agent added passes on the work and fails
// on the base's code, or the reviewer a person asked for approved. A
// claim on a green base with nothing to show for it never passes.
type evidenceCheck struct{}

func (evidenceCheck) Name() string { return "evidence" }
func (evidenceCheck) Stage() Stage { return Result }

func (evidenceCheck) Check(ctx context.Context, j *Judge, c *Case) Finding {
	if c.Claim.NoEvidence || c.Claim.Judged != nil {
		return Finding{Skipped: true}
	}
	if p := c.prior; p != nil && p.tree == c.tree && len(p.evidence) > 0 {
		c.evidence = p.evidence
		return Finding{}
	}
	if len(c.Claim.Gates) == 0 && len(c.Claim.Checks) == 0 && c.Claim.Condition == nil && c.contract != nil && c.contract.Review == "" {
		if j.NoGates {
			// The person chose a run with nothing to check the work by:
			// it passes on the claim and its real work, and says it was
			// not verified.
			return Finding{Note: "not verified: no gate or check judged it (--no-gates)"}
		}
		v := fail("no evidence: no gate, check or review can show it is done",
			"Nothing can show that this item is done: it has no check, the run no gate, and no reviewer was asked for. The harness cannot pass it on your word. Tell the user it needs a check (a command that fails until it is done) or a review.")
		return Finding{Fail: v}
	}
	var ev []Evidence
	gates := len(c.Claim.Gates)
	for i, r := range c.results {
		if !r.Passed {
			continue
		}
		if i >= gates {
			if c.Base == "" {
				continue
			}
			at, ok := j.checkAt(ctx, c.Base, c.Claim.Checks[i-gates], c.Log)
			if ok && !at.Passed {
				ev = append(ev, Evidence{Kind: EvidenceFixed, Gate: r.Name, Detail: "the check failed at the base and passes"})
				if c.contract != nil {
					c.contract.RedAtBase = append(c.contract.RedAtBase, TestRef{Gate: r.Name})
				}
			}
			continue
		}
		ev = append(ev, fixedTests(r, resultOf(c.base, r))...)
	}
	for _, r := range c.results {
		if r.Passed {
			continue
		}
		// A gate red at the base: the tests of it that went green.
		ev = append(ev, fixedTests(r, resultOf(c.base, r))...)
	}
	if c.met != "" {
		ev = append(ev, Evidence{Kind: EvidenceCondition, Detail: c.met})
	}
	if c.Approved && c.contract != nil && c.contract.Review != "" && c.Role == c.contract.Review {
		ev = append(ev, Evidence{Kind: EvidenceReview, Detail: c.Role})
	}
	if len(ev) == 0 {
		more, why := j.newTests(ctx, c)
		ev = append(ev, more...)
		if len(ev) == 0 {
			msg := "Nothing that failed before your change passes now, so there is no evidence that the item is done. "
			if why != "" {
				msg += why + " "
			}
			msg += "Add a test (in a new file) that fails without your change and passes with it, or make the item's failing check or test pass."
			if c.contract != nil && c.contract.Review != "" {
				msg += " This item also passes with the " + c.contract.Review + "'s approval."
			}
			summary := "no evidence: nothing that failed at the base passes now"
			if len(c.stillRed) > 0 {
				var red []string
				for _, t := range c.stillRed {
					red = append(red, t.String())
				}
				summary = list(red, 3) + " FAILED, as at the base; " + summary
			}
			v := fail(summary, msg)
			v.Unproven = true
			return Finding{Fail: v}
		}
	}
	c.evidence = ev
	return Finding{}
}

// fixedTests is the evidence in a gate's result against its result at the
// base: per test, the tests that failed there and pass now; without a
// test inventory, the gate itself when it failed there and passes now.
func fixedTests(r gate.Result, base *gate.Result) []Evidence {
	if base == nil {
		return nil
	}
	if r.Tests != nil && r.Tests.PerTest && base.Tests != nil && base.Tests.PerTest {
		var names []string
		for name, o := range r.Tests.Names {
			if o == gate.Pass && base.Tests.Names[name] == gate.Fail {
				names = append(names, name)
			}
		}
		slices.Sort(names)
		var out []Evidence
		for _, n := range names {
			out = append(out, Evidence{Kind: EvidenceFixed, Gate: r.Name, Test: n})
		}
		return out
	}
	if r.Passed && !base.Passed {
		return []Evidence{{Kind: EvidenceFixed, Gate: r.Name}}
	}
	return nil
}

// newTests runs the gates on the base's code with the test files the work
// added: a new test that passes on the work and does not pass there is
// evidence. why says what was found when nothing counts.
func (j *Judge) newTests(ctx context.Context, c *Case) ([]Evidence, string) {
	added := map[string]string{}
	var files []string
	// A test file changed where that may be (a person allowed test
	// changes, or a Go test file gained tests under protected_rule:
	// declarations) is new tests too.
	changedOK := c.Claim.AllowTestChanges || c.contract != nil && c.contract.Declarations
	for _, ch := range c.changes {
		if (ch.Status == 'A' || ch.Status == 'M' && changedOK) && Protected(ch.Path, j.Protect) {
			added[ch.Path] = ch.NewBlob
			files = append(files, ch.Path)
		}
	}
	if len(files) == 0 || c.Base == "" || len(c.Claim.Gates) == 0 {
		return nil, "The work adds no test file."
	}
	baseTree, err := j.Repo.TreeOf(ctx, c.Base)
	if err != nil {
		return nil, ""
	}
	probe, err := j.Repo.WithBlobs(ctx, baseTree, added)
	if err != nil {
		return nil, ""
	}
	fmt.Fprintf(c.log(), "\n=== the new tests (%s) on the base's code: they must fail there\n", list(files, 5))
	onBase, err := j.runAt(ctx, probe, c.Claim.Gates, c.Log, false)
	if err != nil {
		return nil, ""
	}
	var ev []Evidence
	var passing []string
	for _, now := range c.results {
		there := resultOf(onBase, now)
		base := resultOf(c.base, now)
		if there == nil || !now.Passed && (base == nil || base.Passed) {
			continue
		}
		if now.Tests != nil && now.Tests.PerTest && there.Tests != nil && there.Tests.PerTest {
			for name, o := range now.Tests.Names {
				if o != gate.Pass || base != nil && base.Tests != nil && base.Tests.PerTest && base.Tests.Names[name] != "" {
					continue // not passing now, or not new
				}
				if there.Tests.Names[name] == gate.Pass {
					passing = append(passing, name)
					continue
				}
				ev = append(ev, Evidence{Kind: EvidenceNewTest, Gate: now.Name, Test: name})
			}
			continue
		}
		if now.Passed && !there.Passed && gate.RunsTests(now.Name, now.Command) {
			ev = append(ev, Evidence{Kind: EvidenceNewTest, Gate: now.Name, Detail: "the tests in " + list(files, 3) + " fail on the base's code"})
		}
	}
	slices.SortFunc(ev, func(a, b Evidence) int { return strings.Compare(a.Test, b.Test) })
	if len(ev) == 0 && len(passing) > 0 {
		slices.Sort(passing)
		return nil, "The tests you added (" + list(passing, 5) + ") pass on the base's code too, without your change: they show nothing."
	}
	if len(ev) == 0 {
		return nil, "The test files you added (" + list(files, 5) + ") behave the same on the base's code."
	}
	return ev, ""
}
