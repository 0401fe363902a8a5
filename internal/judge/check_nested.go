package judge

import (
	"context"

	"github.com/ralph-loop/ralph/internal/git"
)

// nestedRepoCheck refuses a nested repository the base did not have: a
// folder with its own .git is recorded as a link to a commit (a gitlink)
// that lives nowhere but on this machine, so the work would build
// nowhere else.
type nestedRepoCheck struct{}

func (nestedRepoCheck) Name() string { return "no nested repository" }
func (nestedRepoCheck) Stage() Stage { return Commit }

func (nestedRepoCheck) Check(_ context.Context, _ *Judge, c *Case) Finding {
	var nested []string
	for _, ch := range c.changes {
		if ch.NewMode == git.Gitlink && ch.OldMode != git.Gitlink {
			nested = append(nested, ch.Path)
		}
	}
	if len(nested) == 0 {
		return Finding{}
	}
	return Finding{Fail: fail("a nested repository in "+list(nested, 5),
		"These folders are git repositories of their own (a .git inside): "+list(nested, 10)+". git records them as links to commits that exist only on this machine, so the work would build nowhere else. Put the files in the work tree itself (remove the nested .git).")}
}
