package judge

import (
	"context"
	"fmt"
	"github.com/ralph-loop/ralph/internal/store"
	"path/filepath"
	"slices"
	"strings"

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

// secretsCheck refuses work that holds the value of a secret ralph masks
// (an API key from the environment) in any file it would commit.
type secretsCheck struct{}

func (secretsCheck) Name() string { return "no secrets" }
func (secretsCheck) Stage() Stage { return Commit }

func (secretsCheck) Check(_ context.Context, j *Judge, c *Case) Finding {
	if j.Secret == nil {
		return Finding{Skipped: true}
	}
	var found []string
	for _, ch := range c.changes {
		if ch.Status == 'D' || ch.NewMode == git.Gitlink {
			continue
		}
		// Bounded: a file of terabytes costs its writer nothing; a secret
		// is found in the first 16 MiB or not at all.
		b, _ := store.ReadFileLimit(filepath.Join(c.Dir, ch.Path), 16<<20)
		if names := j.Secret(b); len(names) > 0 {
			found = append(found, ch.Path+" ("+strings.Join(names, ", ")+")")
		}
	}
	if len(found) == 0 {
		return Finding{}
	}
	return Finding{Fail: fail("a secret in "+list(found, 5),
		fmt.Sprintf("These files hold a secret from your environment (an API key or token): %s. It would be committed in clear. Remove it (read it from the environment at run time instead).", list(found, 10)))}
}
