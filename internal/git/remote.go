package git

import (
	"context"

	"github.com/ralph-loop/ralph/internal/proc"
)

// Remote operations for runs spread over machines (internal/cluster): work
// goes out and comes back through an ordinary git remote.

// Clone clones url into dir (which must not exist) and returns the Repo.
func Clone(ctx context.Context, r proc.Runner, url, dir string) (*Repo, error) {
	repo := &Repo{Dir: dir, Runner: r}
	c := proc.Cmd{Argv: []string{"git", "clone", "--quiet", "--no-checkout", "--", url, dir}, Env: gitEnv()}
	if _, err := proc.Output(ctx, r, c); err != nil {
		return nil, err
	}
	return repo, nil
}

// Fetch fetches remote's refs for their objects only (no local ref is
// written; a fetch in a linked worktree writes its own FETCH_HEAD).
func (r *Repo) Fetch(ctx context.Context, remote string, refs ...string) error {
	_, err := r.Run(ctx, append([]string{"fetch", "--quiet", "--no-tags", "--", remote}, refs...)...)
	return err
}

// FetchRefs fetches remote's refs into local ones (pairs of src, dst,
// forced) in one fetch; it fails if any src is missing.
func (r *Repo) FetchRefs(ctx context.Context, remote string, pairs ...string) error {
	args := []string{"fetch", "--quiet", "--no-tags", "--", remote}
	for i := 0; i+1 < len(pairs); i += 2 {
		args = append(args, "+"+pairs[i]+":"+pairs[i+1])
	}
	_, err := r.Run(ctx, args...)
	return err
}

// PushForce sets each dst ref on remote to the local rev src (pairs of
// src, dst), whatever they held.
func (r *Repo) PushForce(ctx context.Context, remote string, pairs ...string) error {
	return r.push(ctx, remote, "+", pairs)
}

// Push sets each dst ref on remote to the local rev src (pairs of src,
// dst) where that only moves it forward: git refuses the push when the
// remote's ref has commits src does not.
func (r *Repo) Push(ctx context.Context, remote string, pairs ...string) error {
	return r.push(ctx, remote, "", pairs)
}

func (r *Repo) push(ctx context.Context, remote, force string, pairs []string) error {
	args := []string{"push", "--quiet", "--no-verify", "--", remote}
	for i := 0; i+1 < len(pairs); i += 2 {
		args = append(args, force+pairs[i]+":"+pairs[i+1])
	}
	_, err := r.Run(ctx, args...)
	return err
}

// CheckoutDetached puts the tree at rev, detached, discarding local
// changes and untracked files (ignored ones too: a fresh tree per job).
func (r *Repo) CheckoutDetached(ctx context.Context, rev string) error {
	if _, err := r.Run(ctx, "checkout", "--quiet", "--force", "--detach", rev, "--"); err != nil {
		return err
	}
	return r.CleanUntracked(ctx)
}

// MergeFastForward moves the checked-out branch forward to rev.
func (r *Repo) MergeFastForward(ctx context.Context, rev string) error {
	_, err := r.Run(ctx, "merge", "--quiet", "--ff-only", rev)
	return err
}
