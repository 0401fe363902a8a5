package judge

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/ralph-loop/ralph/internal/git"
	"github.com/ralph-loop/ralph/internal/land"
)

// recordStep records the item's work as a tree — the work tree as git
// would commit it, but the user's own dirty files and what git ignores —
// in an index of its own (the agent's and the user's index is never
// touched), builds it on the end of the lander's queue (merged onto the
// plans ahead of it when the item's base is behind), adds ralph's
// bookkeeping (the PRD with the story marked passed) and takes the tree's
// place in the queue. The gates then judge exactly that tree, and exactly
// that tree lands.
type recordStep struct{}

func (recordStep) Name() string { return "the work recorded" }
func (recordStep) Stage() Stage { return Record }

// maxRebuilds bounds how often a recording chases a queue that moves.
const maxRebuilds = 8

func (recordStep) Check(ctx context.Context, j *Judge, c *Case) Finding {
	repo := j.Repo.At(c.Dir)
	index, err := c.gitPath(ctx, j, "index")
	if err != nil {
		return Finding{Fail: fail("could not record the work", err.Error())}
	}
	// marked: the snapshot was taken in place, with the bookkeeping in
	// it. One taken to merge onto plans ahead has none, and is taken
	// again once those went and the work lands in place.
	marked := false
	// The turn to build on the queue's end, held from End to Enqueue.
	release := func() {}
	defer func() { release() }()
	for round := 0; round < maxRebuilds; round++ {
		release()
		var on *land.Ticket
		base, endTree := c.Base, ""
		if c.Lander != nil {
			release = c.Lander.Build()
			on, base, endTree = c.Lander.End()
		}
		if c.Base == "" {
			c.Base = base
		}
		inPlace := on == nil && base == c.onto()
		if !inPlace || !marked {
			var extra map[string][]byte
			if inPlace {
				if extra, err = j.marks(ctx, c, orBase(endTree, base), true); err != nil {
					return Finding{Fail: fail("could not record ralph's bookkeeping", err.Error())}
				}
			}
			c.marked = c.marked[:0]
			for p := range extra {
				c.marked = append(c.marked, p)
			}
			c.snap.Remove()
			if c.snap, err = repo.SnapshotTree(ctx, index, c.onto(), c.except(), extra); err != nil {
				return Finding{Fail: fail("could not record the work", err.Error())}
			}
			// What the work changed is read from this snapshot, with
			// these marks: one taken in place holds the item's own
			// mark, which is no work once the next is taken without it.
			c.own, marked, c.changes = c.snap.Tree, inPlace, nil
		}
		if c.changes == nil && c.Base != "" {
			if c.changes, err = j.Repo.Changes(ctx, c.Base, c.own); err != nil {
				return Finding{Fail: fail("could not list what the work changed", err.Error())}
			}
		}
		tree, spec := c.own, ""
		if !inPlace {
			var conflicted []string
			tree, spec, conflicted, err = j.integrate(ctx, c, on, base)
			if err != nil {
				return Finding{Fail: fail("could not build the work on the branch", err.Error())}
			}
			if len(conflicted) > 0 {
				if on != nil {
					// It may be the plans ahead that it conflicts with:
					// once they landed (or left), it is built on the tip.
					release()
					c.Lander.Wait(ctx, on)
					continue
				}
				return Finding{Fail: &Verdict{Claimed: true, Summary: "merge conflict with " + c.Claim.Target + " in " + strings.Join(conflicted, ", "),
					Failure:  "Your work does not merge cleanly onto " + c.Claim.Target + " (other work landed there since you started): " + strings.Join(conflicted, ", ") + ".",
					Conflict: &Conflict{Paths: conflicted}}}
			}
		}
		c.tree = tree
		if c.Lander == nil {
			return Finding{}
		}
		if spec == "" && c.Claim.Own != "" {
			// Work of other trees may be built on this one while it is
			// judged: git merges onto a commit.
			if spec, err = j.Repo.CommitTreeMsg(ctx, tree, []string{base}, "ralph: "+c.Item+" as judged"); err != nil {
				return Finding{Fail: fail("could not record the work", err.Error())}
			}
		}
		t, err := c.Lander.Enqueue(land.Plan{Item: c.Item, Tree: tree, On: on, Base: base, Commit: spec})
		release()
		if errors.Is(err, land.ErrStale) {
			continue // the end moved while it was built: build again
		}
		if err != nil {
			return Finding{Fail: fail("could not queue the work to land", err.Error())}
		}
		c.ticket = t
		if on != nil {
			fmt.Fprintf(c.log(), "ralph: judging %s on %s with the work ahead of it in the queue (tree %s)\n", c.Item, c.Claim.Target, short(tree))
		} else if !inPlace {
			fmt.Fprintf(c.log(), "ralph: judging %s merged onto %s as it is now (tree %s)\n", c.Item, c.Claim.Target, short(tree))
		}
		return Finding{}
	}
	return Finding{Fail: fail("the branch kept moving while the work was built on it", fmt.Sprintf("%s moved %d times while this work was being built on it; it is judged again next iteration.", c.Claim.Target, maxRebuilds))}
}

// except are the paths never recorded as work: the user's files that were
// dirty before the run, and the source's own (a task tree's files).
func (c *Case) except() []string {
	return append(append([]string{}, c.Preexisting...), c.Claim.Exclude...)
}

// onto is the commit the work tree's content is built on: the item's
// base, unless the source says otherwise (a loop's last landing, a
// resolver's merge of the branch).
func (c *Case) onto() string {
	if c.Claim.Onto != "" {
		return c.Claim.Onto
	}
	return c.Base
}

func orBase(tree, base string) string {
	if tree != "" {
		return tree
	}
	return base
}

// marks is the source's bookkeeping read against what the work is built
// on (a tree or commit).
func (j *Judge) marks(ctx context.Context, c *Case, on string, onTip bool) (map[string][]byte, error) {
	if c.Claim.Mark == nil {
		return nil, nil
	}
	return c.Claim.Mark(func(path string) []byte {
		b, err := j.Repo.Blob(ctx, on+":"+path)
		if err != nil {
			return nil
		}
		return b
	}, onTip)
}

// integrate merges the item's own work (c.own on its base) onto the end
// of the queue (a plan's commit, or the tip) and adds the bookkeeping:
// the tree to judge, and a commit of it on the end for the work behind.
func (j *Judge) integrate(ctx context.Context, c *Case, on *land.Ticket, base string) (tree, spec string, conflicted []string, err error) {
	end := base
	if on != nil {
		end = on.Plan().Commit
	}
	// The work's history is the agent's commits where its tree has them:
	// a branch that merged the tip in merges onto it from there, not from
	// the item's base (what the merge brought and the agent then undid
	// stays undone).
	parent := c.onto()
	if head, err := j.Repo.At(c.Dir).Head(ctx); err == nil && head != parent && j.Repo.IsAncestor(ctx, parent, head) {
		parent = head
	}
	own, err := j.Repo.CommitTreeMsg(ctx, c.own, []string{parent}, "ralph: the work of "+c.Item)
	if err != nil {
		return "", "", nil, err
	}
	merged, conflicted, err := j.Repo.MergeTrees(ctx, end, own)
	if err != nil || len(conflicted) > 0 {
		return "", "", conflicted, err
	}
	extra, err := j.marks(ctx, c, merged, false)
	if err != nil {
		return "", "", nil, err
	}
	c.marked = c.marked[:0]
	for p := range extra {
		c.marked = append(c.marked, p)
	}
	tree = merged
	if len(extra) > 0 {
		if tree, err = j.Repo.WithFiles(ctx, merged, extra); err != nil {
			return "", "", nil, err
		}
	}
	spec, err = j.Repo.CommitTreeMsg(ctx, tree, []string{end}, "ralph: "+c.Item+" as judged")
	return tree, spec, nil, err
}

// RecordWork records what an iteration left, unverified, as a commit on
// its branch (the plain loop keeps every iteration's work: the next
// fresh agent finds it in git). It returns the commit ("" when nothing
// changed).
func (j *Judge) RecordWork(ctx context.Context, c *Case, msg string) (string, error) {
	if c.Lander == nil {
		return "", nil
	}
	repo := j.Repo.At(c.Dir)
	index, err := c.gitPath(ctx, j, "index")
	if err != nil {
		return "", err
	}
	snap, err := repo.SnapshotTree(ctx, index, c.onto(), c.except(), nil)
	if err != nil {
		return "", err
	}
	tip := c.Lander.Tip()
	if tipTree, err := j.Repo.TreeOf(ctx, tip); err == nil && tipTree == snap.Tree {
		snap.Remove()
		return "", nil
	}
	t, err := c.Lander.Enqueue(land.Plan{Item: c.Item, Tree: snap.Tree, Base: tip})
	if err != nil {
		snap.Remove()
		return "", err
	}
	return c.Lander.Land(ctx, t, msg, func(ctx context.Context, old, landed string) error {
		return snap.UseIndex()
	})
}

var _ = git.Gitlink
