package git

import (
	"context"
	"strings"
)

// MergeBase is the best common ancestor of a and b.
func (r *Repo) MergeBase(ctx context.Context, a, b string) (string, error) {
	return r.Run(ctx, "merge-base", a, b)
}

// Diff is the patch from commit from to commit to (rename detection on,
// no external diff driver or textconv: the bytes as committed).
func (r *Repo) Diff(ctx context.Context, from, to string) (string, error) {
	return r.Run(ctx, "diff", "--no-ext-diff", "--no-textconv", "--no-color", "-M", from, to)
}

// DiffStat is `git diff --stat` from from to to.
func (r *Repo) DiffStat(ctx context.Context, from, to string) (string, error) {
	return r.Run(ctx, "diff", "--no-ext-diff", "--no-color", "--stat=120", "-M", from, to)
}

// DiffNames are the paths that differ between from and to.
func (r *Repo) DiffNames(ctx context.Context, from, to string) ([]string, error) {
	out, err := r.Run(ctx, "diff", "--no-ext-diff", "--name-only", "-M", from, to)
	if err != nil || out == "" {
		return nil, err
	}
	return strings.Split(out, "\n"), nil
}

// HasCommit reports whether rev names a commit.
func (r *Repo) HasCommit(ctx context.Context, rev string) bool {
	return r.ok(ctx, "rev-parse", "--verify", "--quiet", rev+"^{commit}")
}
