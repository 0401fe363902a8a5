package judge

import "context"

// claimCheck: an iteration is judged only when it claims the item done
// (the completion promise, the source's own signal, a role's approval)
// and the agent's run finished. Otherwise nothing is recorded or run,
// and the verdict says what the next agent must do.
type claimCheck struct{}

func (claimCheck) Name() string { return "claim" }
func (claimCheck) Stage() Stage { return Claiming }

func (claimCheck) Check(_ context.Context, _ *Judge, c *Case) Finding {
	switch {
	case c.AgentFailed != nil:
		return Finding{Fail: c.AgentFailed}
	case c.Rejected != "":
		v := Rejection(c.Role, c.Rejected)
		return Finding{Fail: &v}
	case c.Claim.Refused != nil:
		return Finding{Fail: c.Claim.Refused}
	case c.Claim.Judged != nil && !c.Claim.Judged.Passed:
		return Finding{Fail: c.Claim.Judged}
	case c.Claim.Judged == nil && !c.claimed():
		v := c.Claim.Unclaimed
		v.Claimed = false
		return Finding{Fail: &v}
	case c.Claim.Judged != nil && c.Claim.NoLand:
		return Finding{Done: true}
	}
	return Finding{}
}
