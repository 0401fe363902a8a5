package judge

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ralph-loop/ralph/internal/git"
)

// hooksCheck disables git hooks written during the run and reports a
// core.hooksPath the repository's config gained. ralph's own git runs
// with hooks off, so they never touch what it records; left in place
// they would run for the user's own git commands.
type hooksCheck struct{}

func (hooksCheck) Name() string { return "git hooks" }
func (hooksCheck) Stage() Stage { return Restore }

func (hooksCheck) Check(ctx context.Context, j *Judge, c *Case) Finding {
	if c.Since.IsZero() {
		return Finding{Skipped: true}
	}
	var f Finding
	hooks := filepath.Join(j.gitDir, "hooks")
	entries, _ := os.ReadDir(hooks)
	var moved []string
	for _, e := range entries {
		if e.IsDir() || strings.HasSuffix(e.Name(), ".sample") || !git.WrittenSince(filepath.Join(hooks, e.Name()), c.Since) {
			continue
		}
		to := filepath.Join(j.gitDir, "ralph-disabled-hooks", e.Name())
		if os.MkdirAll(filepath.Dir(to), 0o700) == nil && os.Rename(filepath.Join(hooks, e.Name()), to) == nil {
			moved = append(moved, e.Name())
		}
	}
	if len(moved) > 0 {
		f.Tampered = append(f.Tampered, fmt.Sprintf("git hooks written during the run (%s) were moved to ralph-disabled-hooks in the git folder: ralph's git runs with hooks off, and they would have run for your own git commands", strings.Join(moved, ", ")))
	}
	if git.WrittenSince(filepath.Join(j.gitDir, "config"), c.Since) {
		if hp := j.Repo.LocalHooksPath(ctx); hp != "" {
			j.mu.Lock()
			seen := j.hooksSeen == hp
			j.hooksSeen = hp
			j.mu.Unlock()
			if !seen {
				f.Tampered = append(f.Tampered, fmt.Sprintf("the repository's git config, written during the run, sets core.hooksPath to %s: ralph's git runs with hooks off, but your own git commands would run the hooks there (`git config --local --unset core.hooksPath` if you did not set it)", hp))
			}
		}
	}
	return f
}
