package judge

import (
	"context"
	"slices"
)

// realWorkCheck: a claim passes only when the work changes something
// besides ralph's own bookkeeping (the PRD's passes, progress files). A
// bare claim — nothing done, the promise said — never passes.
type realWorkCheck struct{}

func (realWorkCheck) Name() string { return "real work" }
func (realWorkCheck) Stage() Stage { return Commit }

func (realWorkCheck) Check(_ context.Context, _ *Judge, c *Case) Finding {
	for _, ch := range c.changes {
		if !slices.Contains(c.Claim.Bookkeeping, ch.Path) && !slices.Contains(c.marked, ch.Path) {
			return Finding{}
		}
	}
	return Finding{Fail: fail("no change: the claim comes with no work",
		"You claimed completion, but the work tree holds no change since the item's base besides ralph's own bookkeeping. Make the change the item asks for (and a test that shows it), then claim it.")}
}
