package judge

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/ralph-loop/ralph/internal/store"

	"github.com/ralph-loop/ralph/internal/git"
)

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
