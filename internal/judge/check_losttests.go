package judge

import (
	"context"
	"slices"
	"strings"

	"github.com/ralph-loop/ralph/internal/gate"
)

// lostTestsCheck: every test that passed at the item's base still passes
// — none skipped, failing, renamed away or no longer run — unless a
// person allowed test changes on the item.
type lostTestsCheck struct{}

func (lostTestsCheck) Name() string { return "tests green at the base stay green" }
func (lostTestsCheck) Stage() Stage { return Result }

func (lostTestsCheck) Check(_ context.Context, _ *Judge, c *Case) Finding {
	if len(c.base) == 0 {
		return Finding{Skipped: true}
	}
	if c.contract != nil {
		c.contract.GreenAtBase, c.contract.RedAtBase, c.contract.NoInventory = 0, nil, nil
		for _, r := range c.base {
			switch {
			case r.Tests != nil && r.Tests.PerTest:
				for name, o := range r.Tests.Names {
					switch o {
					case gate.Pass:
						c.contract.GreenAtBase++
					case gate.Fail:
						c.contract.RedAtBase = append(c.contract.RedAtBase, TestRef{Gate: r.Name, Test: name})
					}
				}
			case r.Tests != nil:
				c.contract.GreenAtBase += r.Tests.Passed
			default:
				if gate.RunsTests(r.Name, r.Command) {
					c.contract.NoInventory = append(c.contract.NoInventory, r.Name)
				}
			}
			if !r.Passed && (r.Tests == nil || !r.Tests.PerTest) {
				c.contract.RedAtBase = append(c.contract.RedAtBase, TestRef{Gate: r.Name})
			}
		}
		slices.SortFunc(c.contract.RedAtBase, func(a, b TestRef) int { return strings.Compare(a.String(), b.String()) })
	}
	if c.Claim.AllowTestChanges {
		return Finding{}
	}
	c.lost = gate.LostTests(c.base, c.results)
	if len(c.lost) == 0 {
		return Finding{}
	}
	l := strings.Join(c.lost, ", ")
	return Finding{Fail: fail("tests that passed before now do not: "+l,
		"You claimed completion, but tests that passed before your change no longer pass (skipped, failing, or no longer run): "+l+
			". Fix the code so they pass again; do not skip, delete, rename or exclude tests (an item that must remove tests says allow_test_changes: true, which only a person sets).")}
}
