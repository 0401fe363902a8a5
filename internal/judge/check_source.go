package judge

import "context"

// sourceCheck reads the source's word on the iteration once the run's
// policy is back as pinned: its own files put back (a PRD's flipped
// passes, an invalid edit of the task file), whether its signals claim
// the item done. What it put back is reported as tampering.
type sourceCheck struct{}

func (sourceCheck) Name() string { return "the source's files" }
func (sourceCheck) Stage() Stage { return Restore }

func (sourceCheck) Check(ctx context.Context, _ *Judge, c *Case) Finding {
	if c.Read != nil {
		c.Claim = c.Read(ctx)
		c.Read = nil
	}
	return Finding{Tampered: c.Claim.Tampered}
}
