package source

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/gate"
	"github.com/ralph-loop/ralph/internal/git"
)

// branchGuard holds what ralph knows of the branch it works on in the main
// tree: the head it last left there (the run's start, or its own last
// commit). Before an item's work is judged, and again before it is
// committed, the tree must be on that branch and the branch must still
// contain that head — every earlier passed item's commit. An agent that
// switched branches or rewrote the branch (reset, rebase, force) is
// reported, its work is kept on a side branch, and the branch is put back.
type branchGuard struct {
	mu  sync.Mutex
	tip string
	// head is where check last found HEAD, all well (it saves the caller
	// asking git again).
	head string
	// descent remembers "a is an ancestor of b" for commits already
	// checked: commits never change, so each pair costs one git call per
	// run, not one per check.
	descent map[[2]string]bool
}

// settle finishes a passing verdict on the main tree after the gates ran:
// one `git status` both lists the item's files (for the engine, which
// would otherwise ask git the same) and shows whether the tree moved away
// from the snapshot the gates ran on (a gate, or a process the agent left
// running, wrote a file). A moved tree fails the verdict. (A gate that
// staged what it wrote is found by the commit's own snapshot.)
func (g *branchGuard) settle(ctx context.Context, repo *git.Repo, a *engine.Attempt, v engine.Verdict, preexisting []string) engine.Verdict {
	if !v.Passed || v.Tree == "" {
		return v
	}
	entries, err := repo.Status(ctx, ".ralph/")
	if err != nil {
		return v // the commit's own snapshot decides
	}
	files := []string{}
	var moved []string
	for _, e := range entries {
		files = append(files, e.Path)
		if e.Unstaged() && !slices.Contains(preexisting, e.Path) {
			moved = append(moved, e.Path)
		}
	}
	a.Files = files
	if len(moved) > 0 {
		return treeMoved(v, moved)
	}
	return v
}

// descends reports whether commit a is an ancestor of (or is) commit b.
func (g *branchGuard) descends(ctx context.Context, repo *git.Repo, a, b string) bool {
	if a == b {
		return true
	}
	key := [2]string{a, b}
	g.mu.Lock()
	known := g.descent[key]
	g.mu.Unlock()
	if known {
		return true
	}
	if !repo.IsAncestor(ctx, a, b) {
		return false
	}
	g.mu.Lock()
	if g.descent == nil {
		g.descent = map[[2]string]bool{}
	}
	g.descent[key] = true
	g.mu.Unlock()
	return true
}

// known is the newest commit ralph verified on the branch: its tip, else
// base (from state, after a resume).
func (g *branchGuard) known(base string) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.tip != "" {
		return g.tip
	}
	return base
}

// recordRecovered records sha, a story's commit found after a crash, as
// the tip unless the tip has already moved past it: in a parallel run a
// merge made since the resume may be on top of it, and moving the tip back
// would take that merge for someone else's commit and restore the branch
// without it.
func (g *branchGuard) recordRecovered(ctx context.Context, repo *git.Repo, sha string) {
	g.mu.Lock()
	tip := g.tip
	g.mu.Unlock()
	if tip != "" && tip != sha && g.descends(ctx, repo, sha, tip) {
		return
	}
	g.recordTip(sha)
}

func (g *branchGuard) recordTip(sha string) {
	g.mu.Lock()
	g.tip = sha
	g.mu.Unlock()
}

// tampering is what check found: what to report, and the retry context.
type tampering struct {
	report  string
	failure string
}

// check verifies the tree at repo against branch and the known heads:
// the guard's tip and base (the item's recorded base, from state). It
// repairs what it finds and returns nil when all was well. With exact, the
// branch must be at the guard's tip itself (a branch only ralph commits
// to, such as a parallel run's feature branch).
func (g *branchGuard) check(ctx context.Context, repo *git.Repo, branch, base, itemID, runID string, preexisting []string, exact ...bool) (*tampering, error) {
	g.mu.Lock()
	tip := g.tip
	g.mu.Unlock()
	cur, head, err := repo.Where(ctx)
	if err != nil {
		return nil, err
	}
	if cur == "HEAD" {
		cur = "" // detached
	}
	if cur != branch {
		where := "branch " + cur
		if cur == "" {
			where = "a detached HEAD"
		}
		side, err := parkWork(ctx, repo, "tampered", itemID, runID, preexisting, fmt.Sprintf("wip(%s): work the agent left on %s", itemID, where), false)
		if err != nil {
			return nil, err
		}
		if err := repo.Checkout(ctx, branch); err != nil {
			return nil, fmt.Errorf("returning to %s: %w", branch, err)
		}
		return &tampering{
			report: fmt.Sprintf("the agent left the tree on %s instead of %s; its work is kept on %s and the tree is back on %s", where, branch, side, branch),
			failure: fmt.Sprintf("Your work must be on the branch %s, where the harness verifies and commits it, but the previous iteration left the tree on %s. "+
				"That work is kept on %s; the tree is back on %s. Do not switch branches.", branch, where, side, branch),
		}, nil
	}
	var herr error
	if head == "" {
		herr = fmt.Errorf("%s has no commit", branch)
	}
	for _, known := range []string{tip, base} {
		if known == "" {
			continue
		}
		if known == tip && len(exact) > 0 && exact[0] {
			if herr == nil && head != tip && g.descends(ctx, repo, tip, head) {
				added, _ := repo.Log(ctx, tip+"..HEAD", "%h %s")
				side, err := parkWork(ctx, repo, "tampered", itemID, runID, preexisting, fmt.Sprintf("wip(%s): commits made on %s outside the merge queue", itemID, branch), false)
				if err != nil {
					return nil, err
				}
				if err := repo.Checkout(ctx, branch); err != nil {
					return nil, err
				}
				if err := repo.ResetHard(ctx, tip); err != nil {
					return nil, err
				}
				return &tampering{
					report:  fmt.Sprintf("%s was committed to outside the merge queue (%s); the branch is restored to %s and those commits kept on %s", branch, strings.Join(added, "; "), short(tip), side),
					failure: fmt.Sprintf("Only the harness commits to %s. Commits made there directly (%s) were moved to %s. Work on your story's own branch in your work tree.", branch, strings.Join(added, "; "), side),
				}, nil
			}
		}
		if herr == nil && g.descends(ctx, repo, known, head) {
			continue
		}
		if known != tip && lostCommit(ctx, repo, known) {
			// A base the state recorded but the repository lacks (saved
			// ahead of git): the branch cannot have dropped what it never
			// had. (The tip is a commit this process made or found.)
			continue
		}
		dropped, _ := repo.Log(ctx, "HEAD.."+known, "%h %s")
		side, err := parkWork(ctx, repo, "tampered", itemID, runID, preexisting, fmt.Sprintf("wip(%s): the agent's version of %s", itemID, branch), false)
		if err != nil {
			return nil, err
		}
		if err := repo.Checkout(ctx, branch); err != nil {
			return nil, err
		}
		// Back to the newest commit ralph knows that the branch lost (the
		// tip is checked first; a process that started after the rewrite
		// only knows the item's base from state).
		restoreTo := known
		if err := repo.ResetHard(ctx, restoreTo); err != nil {
			return nil, fmt.Errorf("restoring %s to %s: %w", branch, short(restoreTo), err)
		}
		what := strings.Join(dropped, "; ")
		if what == "" {
			what = "commit " + short(known)
		}
		return &tampering{
			report: fmt.Sprintf("the agent rewrote %s, dropping %s; the branch is restored to %s and the agent's version kept on %s", branch, what, short(restoreTo), side),
			failure: fmt.Sprintf("The previous iteration rewrote the history of %s (reset, rebase or amend), dropping %s. The harness restored the branch; the rewritten version is kept on %s. "+
				"Never reset, rebase or amend commits that are already on the branch.", branch, what, side),
		}, nil
	}
	g.mu.Lock()
	g.head = head
	g.mu.Unlock()
	return nil, nil
}

// commitVerified is how a main-tree source records a verified item: the
// guard runs again (nothing moved since the verdict), the tree must still
// be the one verified, then it becomes one commit (the agent's own commits
// since the item's base folded in) and the guard's tip. before runs once
// the checks passed, just before the commit (the PRD's write-back).
func (g *branchGuard) commitVerified(ctx context.Context, repo *git.Repo, branch string, a *engine.Attempt, v engine.Verdict, st *engine.State, msg string, allowEmpty bool, before func() ([]string, error)) (string, error) {
	id := a.Item.ID
	base := baseOf(st, id)
	t, err := g.check(ctx, repo, branch, base, id, st.RunID, st.Preexisting)
	if err != nil {
		return "", err
	}
	if t != nil {
		return "", &engine.Rejected{Summary: "tampering after the verdict: " + t.report, Failure: t.failure}
	}
	g.mu.Lock()
	head := g.head
	g.mu.Unlock()
	var folded []string
	if v.Tree != "" {
		if base != "" && head != base {
			// The agent committed: fold its commits (check found HEAD).
			folded, _ = repo.DiffTrees(ctx, base, head)
			if err := repo.ResetSoft(ctx, base); err != nil {
				return "", err
			}
		}
		tree, err := snapshotTree(ctx, repo, st.Preexisting)
		if err != nil {
			return "", err
		}
		if tree != v.Tree {
			return "", treeChanged(ctx, repo, v.Tree, tree)
		}
	}
	var include []string
	if before != nil {
		if include, err = before(); err != nil {
			return "", err
		}
	}
	var sha string
	var files []string
	if v.Tree != "" {
		// The index holds exactly the verified tree: commit it, adding
		// only what before wrote (no second scan of the tree).
		sha, err = repo.CommitInclude(ctx, msg, allowEmpty, include...)
	}
	if v.Tree == "" || err != nil {
		// No snapshot, or a file before wrote that git will not include
		// (an ignored PRD): the whole add.
		if sha, files, err = commitWork(ctx, repo, base, st.Preexisting, msg, allowEmpty); err != nil {
			return "", err
		}
	}
	// The item's files are counted from its base. When the agent
	// committed some itself, git is asked; otherwise the engine's own list
	// of uncommitted changes (made before this commit) is the whole story.
	if files != nil {
		a.Files = union(folded, files)
	}
	if len(folded) > 0 && base != "" {
		if all, err := repo.DiffTrees(ctx, base, sha); err == nil {
			a.Files = all
		}
	}
	g.recordTip(sha)
	return sha, nil
}

// parkWork keeps what the tree holds — HEAD and everything uncommitted
// (but the user's pre-existing files) — on a new side branch
// ralph/<kind>/<item>-<run>[-n] and returns its name. The tree is left on
// the side branch, clean.
func parkWork(ctx context.Context, repo *git.Repo, kind, itemID, runID string, preexisting []string, msg string, allowEmpty bool) (string, error) {
	side := "ralph/" + kind + "/" + git.Slug(itemID, 40) + "-" + runID
	for n := 2; repo.BranchExists(ctx, side); n++ {
		side = fmt.Sprintf("ralph/%s/%s-%s-%d", kind, git.Slug(itemID, 40), runID, n)
	}
	if err := repo.CreateBranch(ctx, side, ""); err != nil {
		return "", err
	}
	if err := repo.Checkout(ctx, side); err != nil {
		return "", err
	}
	if _, _, err := commitWork(ctx, repo, "", preexisting, msg, allowEmpty); err != nil {
		return "", err
	}
	return side, nil
}

func short(sha string) string {
	if len(sha) > 8 {
		return sha[:8]
	}
	return sha
}

// judgeTree is judge on a snapshot of the tree: everything (but the user's
// pre-existing files) is staged and written as a tree before the gates run
// and again after them. A verdict passes only when the gates passed and
// left the tree as they found it — a gate or a leftover process that
// writes into the tree would otherwise get unverified files committed —
// and it carries that tree, so Accept can commit nothing else.
//
// The commit holds exactly the bytes the gates judged:
//   - a staged file whose blob is not the file's bytes (a clean filter or
//     a conversion from the attributes) fails the verdict: the gates would
//     judge other bytes than the commit holds;
//   - ignored files the run created or changed are set aside while the
//     gates run (aside.go), so only the commit and what was there before
//     the run are judged;
//   - untracked files the gates wrote (a binary of `go build`) are removed:
//     never judged, they never reach a commit, and they fail nothing.
//
// With recheckedAtCommit the source's commit snapshots the tree again and
// refuses anything but v.Tree (treeChanged), which covers the gates'
// writes too: the second snapshot here is then skipped.
func judgeTree(ctx context.Context, repo *git.Repo, preexisting []string, a *engine.Attempt, claimed bool, unclaimed engine.Verdict, runner gate.Runner, gates []gate.Gate, recheckedAtCommit bool) engine.Verdict {
	if a.Result.Failed() || !claimed {
		return judge(ctx, a, claimed, unclaimed, runner, gates)
	}
	staged, err := repo.StageAll(ctx, preexisting)
	if err != nil {
		return engine.Verdict{Claimed: true, Summary: "could not snapshot the tree", Failure: err.Error()}
	}
	j := judgingOf(ctx)
	// The files written since the run started; paths the add left out
	// (the user's, ralph's own) are not committed.
	differ, err := repo.NotAsStaged(ctx, func(p string) bool {
		return !keepsPath(preexisting, p) && git.WrittenSince(filepath.Join(repo.Dir, p), j.since)
	})
	if err != nil || len(differ) > 0 {
		_ = staged.Restore(ctx)
		if err != nil {
			return engine.Verdict{Claimed: true, Summary: "could not compare the staged files with the tree", Failure: err.Error()}
		}
		return notAsStaged(differ)
	}
	var hooked []string
	hooksPath := ""
	if !j.since.IsZero() {
		hooked = j.outputs.disableNewHooks(ctx, repo, j.since)
		hooksPath = j.outputs.newHooksPath(ctx, repo, j.since)
	}
	var set *aside
	if !j.since.IsZero() && len(gates) > 0 {
		if set, err = setAside(ctx, repo, j.since, j.outputs, append(slices.Clip(preexisting), j.keep...)); err != nil {
			_ = staged.Restore(ctx)
			return engine.Verdict{Claimed: true, Summary: "could not set aside the files the gates must not see", Failure: err.Error()}
		}
		if note := set.note(); note != "" {
			fmt.Fprintln(logOf(a), "ralph: "+note)
		}
	}
	var gatesStarted time.Time
	if set != nil {
		gatesStarted = j.outputs.clock(ctx, repo)
	}
	v := judge(ctx, a, claimed, unclaimed, runner, gates)
	// While the index still holds everything the agent made, what is
	// untracked now the gates wrote.
	if removed := removeGateFiles(ctx, repo, preexisting); len(removed) > 0 {
		fmt.Fprintf(logOf(a), "ralph: removed what the gates wrote into the tree (never judged, never committed): %s\n", strings.Join(removed, ", "))
	}
	if set != nil {
		j.outputs.gatesRan(repo.Dir, gatesStarted, j.outputs.clock(ctx, repo), set.moved)
		set.putBack()
	}
	if len(hooked) > 0 {
		v.Tampered = append(v.Tampered, fmt.Sprintf("git hooks written during the run (%s) were moved to ralph-disabled-hooks in the git folder: ralph's git runs with hooks off, and they would have run for your own git commands", strings.Join(hooked, ", ")))
	}
	if hooksPath != "" {
		v.Tampered = append(v.Tampered, fmt.Sprintf("the repository's git config, written during the run, sets core.hooksPath to %s: ralph's git runs with hooks off, but your own git commands would run the hooks there (`git config --local --unset core.hooksPath` if you did not set it)", hooksPath))
	}
	if !v.Passed {
		if note := set.note(); note != "" && v.Failure != "" {
			v.Failure += "\n\n" + note
		}
		// The index goes back to what the agent left (if it cannot, the
		// agent finds its work staged: nothing is lost).
		_ = staged.Restore(ctx)
		return v
	}
	if recheckedAtCommit {
		v.Tree = staged.Tree
		return v
	}
	after, err := snapshotTree(ctx, repo, preexisting)
	if err != nil {
		return engine.Verdict{Claimed: true, Gates: v.Gates, Summary: "could not snapshot the tree", Failure: err.Error()}
	}
	if after != staged.Tree {
		changed, _ := repo.DiffTrees(ctx, staged.Tree, after)
		return treeMoved(v, changed)
	}
	v.Tree = staged.Tree
	return v
}

// notAsStaged fails a claim whose staged files are not the bytes in the
// tree.
func notAsStaged(paths []string) engine.Verdict {
	list := strings.Join(paths, ", ")
	return engine.Verdict{Claimed: true, Tampered: []string{"git would commit other bytes than the tree holds: " + list},
		Summary: "git would commit other bytes than the gates see: " + list,
		Failure: "These files would be committed with other contents than the tree holds, so the quality gates would judge something that is not committed: " + list +
			". A git filter (filter= in .gitattributes or .git/info/attributes with a filter.*.clean command in the git config) or an end-of-line or encoding conversion (text, eol, working-tree-encoding) changes them when they are staged. " +
			"Do not add or change git filters or attributes; write each file exactly as it should be committed (for example with the line endings git keeps)."}
}

// treeChanged rejects a commit whose tree is no longer the one the gates
// ran on: a gate or a process the agent left running wrote into it.
func treeChanged(ctx context.Context, repo *git.Repo, verified, now string) error {
	changed, _ := repo.DiffTrees(ctx, verified, now)
	list := strings.Join(changed, ", ")
	return &engine.Rejected{Summary: "the tree changed after the gates started: " + list,
		Failure: "While or after the quality gates ran, these files changed in the tree: " + list + ". The harness commits only the tree the gates ran on: " +
			"make sure no process you started is still writing, and that the gates write only ignored files (add build output to .gitignore)."}
}

// treeMoved fails a verdict whose tree changed while the gates ran.
func treeMoved(v engine.Verdict, changed []string) engine.Verdict {
	list := strings.Join(changed, ", ")
	return engine.Verdict{Claimed: true, Gates: v.Gates, Tampered: v.Tampered, Summary: "the tree changed while the gates ran: " + list,
		Failure: "While the quality gates ran, these files changed in the tree: " + list + ". The harness commits only a tree the gates ran on: " +
			"make sure no process you started is still writing, and that the gates write only ignored files (add build output to .gitignore)."}
}

// snapshotTree stages the whole tree but the user's pre-existing files and
// returns the tree object that a commit of the index would hold.
func snapshotTree(ctx context.Context, repo *git.Repo, preexisting []string) (string, error) {
	if _, err := repo.AddAllExcept(ctx, preexisting); err != nil {
		return "", err
	}
	return repo.WriteTree(ctx)
}
