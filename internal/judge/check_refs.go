package judge

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// refsCheck keeps the refs the agent may not move where they were when it
// started: a branch or tag it moved, made or deleted is put back, its
// version kept under refs/ralph/kept/ so nothing is lost, and reported.
// The agent moves only the branch of its own tree: the branch its work
// lands on moves only through the lander, and commits the agent made on
// it are folded into the item's commit when it claims the item done. A rewrite of that branch (a
// reset or rebase that drops what landed), a replace ref, or a tree left
// on another branch fails the claim.
type refsCheck struct{}

func (refsCheck) Name() string { return "refs ralph did not move" }
func (refsCheck) Stage() Stage { return Restore }

func (refsCheck) Check(ctx context.Context, j *Judge, c *Case) Finding {
	if c.RefsBefore == nil {
		return Finding{Skipped: true}
	}
	var f Finding
	repo := j.Repo.At(c.Dir)
	target, own := "", ""
	if c.Claim.Target != "" {
		target = "refs/heads/" + c.Claim.Target
	}
	if c.Claim.Own != "" {
		own = "refs/heads/" + c.Claim.Own
	}
	want := own
	if want == "" {
		want = target
	}
	// The branch HEAD is on comes with the refs when the agent's tree is
	// the repository's own; else (a worktree, or no branch found) it is
	// asked of the tree.
	now, head, refsErr := j.Repo.RefsAndHead(ctx)
	// The tree must be on its branch: HEAD goes back there, the tree as
	// the agent left it (nothing of its work is lost).
	if want != "" {
		if head == "" || filepath.Clean(c.Dir) != filepath.Clean(j.Repo.Dir) {
			head, _ = repo.Run(ctx, "symbolic-ref", "-q", "HEAD")
		}
		if head != want {
			where := "a detached HEAD"
			if head != "" {
				where = "branch " + strings.TrimPrefix(head, "refs/heads/")
			}
			if _, err := repo.Run(ctx, "symbolic-ref", "HEAD", want); err != nil {
				f.Fail = fail("checking the branch failed", err.Error())
				return f
			}
			name := strings.TrimPrefix(want, "refs/heads/")
			f.Tampered = append(f.Tampered, fmt.Sprintf("the agent left the tree on %s instead of %s; HEAD is back on %s, the tree as the agent left it", where, name, name))
			f.Fail = fail("tampering: the agent switched branches",
				fmt.Sprintf("Your work must be on the branch %s, where the harness judges it, but the previous iteration left the tree on %s. HEAD is back on %s with your files as you left them. Do not switch branches.", name, where, name))
		}
	}
	if refsErr != nil {
		if f.Fail == nil {
			f.Fail = fail("reading the refs failed", refsErr.Error())
		}
		return f
	}
	var names []string
	for r := range c.RefsBefore {
		names = append(names, r)
	}
	for r := range now {
		if _, ok := c.RefsBefore[r]; !ok {
			names = append(names, r)
		}
	}
	slices.Sort(names)
	tip := ""
	if c.Lander != nil {
		tip = c.Lander.Tip()
	}
	made := func(sha string) bool { return c.Lander != nil && c.Lander.Made(sha) }
	for _, ref := range names {
		old, cur := c.RefsBefore[ref], now[ref]
		if old == cur || ref == own || ref != target && (strings.HasPrefix(ref, "refs/ralph/") || strings.HasPrefix(ref, "refs/heads/ralph/") ||
			strings.HasPrefix(ref, "refs/remotes/") || ref == "refs/stash") {
			continue
		}
		short := strings.TrimPrefix(strings.TrimPrefix(ref, "refs/heads/"), "refs/")
		if ref == target && tip != "" {
			switch {
			case cur == tip || made(cur):
				continue // the lander's own move
			case own == "" && cur != "" && repo.IsAncestor(ctx, tip, cur):
				// The agent committed on the branch. Until it claims the
				// item done its commits stay (the next iteration reads
				// them in git log, a trigger counts them); a claim folds
				// them into the item's commit, which lands on the tip.
				if claim := (claimCheck{}).Check(ctx, j, c); claim.Fail != nil || claim.Done {
					continue
				}
				if err := j.Repo.UpdateRef(ctx, ref, tip, cur, "ralph: fold the agent's commits"); err != nil {
					f.Fail = fail("putting the branch back failed", err.Error())
					return f
				}
				continue
			case own != "" && cur != "" && repo.IsAncestor(ctx, tip, cur):
				// Commits on the branch from elsewhere (a person's; a
				// sandboxed agent cannot move that ref): they stay, and
				// the lander builds the item's work on them.
				continue
			}
			rng := tip
			if cur != "" {
				rng = cur + ".." + tip
			}
			dropped, _ := repo.Log(ctx, rng, "%h %s")
			what := strings.Join(dropped, "; ")
			if what == "" {
				what = "commit " + short8(tip)
			}
			kept := ""
			if own == "" {
				// The agent's tree is on the branch: what it holds is kept
				// with the rewritten history, and the tree goes back to
				// the tip with the branch (the next iteration starts from
				// what landed, with nothing of it missing).
				kept = j.keepTree(ctx, c, ref, cur)
			} else if cur != "" {
				kept = j.keep(ctx, c, ref, cur)
			}
			if err := j.restoreRef(ctx, ref, tip, cur); err != nil {
				f.Fail = fail("putting the branch back failed", err.Error())
				return f
			}
			if own == "" {
				if err := repo.ResetHard(ctx, tip); err != nil {
					f.Fail = fail("putting the tree back failed", err.Error())
					return f
				}
			}
			report := fmt.Sprintf("the agent rewrote %s, dropping %s; restored to %s", short, what, short8(tip))
			if kept != "" {
				report += ", the agent's version kept as " + kept
			}
			f.Tampered = append(f.Tampered, report)
			f.Fail = fail("tampering: "+report,
				fmt.Sprintf("The previous iteration rewrote the history of %s (reset, rebase or amend), dropping %s. The harness restored the branch. Never reset, rebase or amend commits that are already on the branch.", short, what))
			continue
		}
		kept := ""
		if cur != "" {
			kept = j.keep(ctx, c, ref, cur)
		}
		if err := j.restoreRef(ctx, ref, old, cur); err != nil {
			f.Tampered = append(f.Tampered, fmt.Sprintf("the agent changed %s and it could not be put back: %v", ref, err))
			continue
		}
		what := fmt.Sprintf("moved %s from %s to %s", short, short8(old), short8(cur))
		switch {
		case old == "":
			what = fmt.Sprintf("made %s (at %s)", short, short8(cur))
		case cur == "":
			what = fmt.Sprintf("deleted %s (was %s)", short, short8(old))
		}
		msg := "the agent " + what + "; put back"
		if kept != "" {
			msg += ", its version kept as " + kept
		}
		f.Tampered = append(f.Tampered, msg)
		if strings.HasPrefix(ref, "refs/replace/") && f.Fail == nil {
			f.Fail = fail("tampering: a replace ref",
				"The previous iteration made "+ref+", which makes git show one object in place of another. Replace refs are not allowed; it was removed.")
		}
	}
	return f
}

// keep saves sha under refs/ralph/kept/<run>/<iteration>/<ref>, so what
// the agent made is never lost, and returns that name.
func (j *Judge) keep(ctx context.Context, c *Case, ref, sha string) string {
	name := fmt.Sprintf("refs/ralph/kept/%s/%d/%s", c.RunID, c.Iteration, strings.TrimPrefix(ref, "refs/"))
	if err := j.Repo.UpdateRef(ctx, name, sha, "", "ralph: keep the agent's "+ref); err != nil {
		_ = j.Repo.DeleteRef(ctx, name, "")
		_ = j.Repo.UpdateRef(ctx, name, sha, "", "ralph: keep the agent's "+ref)
	}
	return name
}

// keepTree keeps the agent's whole tree (its uncommitted work on top of
// cur) under a ralph ref, like keep.
func (j *Judge) keepTree(ctx context.Context, c *Case, ref, cur string) string {
	repo := j.Repo.At(c.Dir)
	index, err := c.gitPath(ctx, j, "index")
	if err != nil {
		return j.keep(ctx, c, ref, cur)
	}
	snap, err := repo.SnapshotTree(ctx, index, cur, c.except(), nil)
	if err != nil {
		return j.keep(ctx, c, ref, cur)
	}
	defer snap.Remove()
	var parents []string
	if cur != "" {
		parents = []string{cur}
	}
	wip, err := j.Repo.CommitTreeMsg(ctx, snap.Tree, parents, "wip("+c.Item+"): the agent's tree when it rewrote "+strings.TrimPrefix(ref, "refs/heads/"))
	if err != nil {
		return j.keep(ctx, c, ref, cur)
	}
	return j.keep(ctx, c, ref, wip)
}

// restoreRef puts ref back at old ("" deletes it) if it is still at cur.
func (j *Judge) restoreRef(ctx context.Context, ref, old, cur string) error {
	if old == "" {
		return j.Repo.DeleteRef(ctx, ref, cur)
	}
	if cur == "" {
		return j.Repo.UpdateRef(ctx, ref, old, "", "ralph: put back "+ref)
	}
	return j.Repo.UpdateRef(ctx, ref, old, cur, "ralph: put back "+ref)
}

func short8(sha string) string {
	if sha == "" {
		return "nothing"
	}
	return short(sha)
}
