package source

import (
	"context"
	"fmt"

	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/gate"
	"github.com/ralph-loop/ralph/internal/git"
	"github.com/ralph-loop/ralph/internal/usage"
)

// PRD runs the stories of a prd.json one at a time in the main work tree,
// on one feature branch, one commit per story.
type PRD struct {
	*prdDoc
	guard branchGuard
}

// OpenPRD loads and validates path for a sequential run.
func OpenPRD(path string, repo *git.Repo, gates gate.Runner) (*PRD, error) {
	d, err := openPRDDoc(path, repo, gates)
	if err != nil {
		return nil, err
	}
	return &PRD{prdDoc: d}, nil
}

// Next is the first ready story by priority, then file order.
func (s *PRD) Next(st *engine.State, busy map[string]bool) (*engine.Item, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	story := s.Doc.NextStoryBy(func(id string) bool {
		is := st.Items[id]
		return is != nil && is.Status == engine.ItemPassed
	}, func(id string) bool {
		is := st.Items[id]
		return busy[id] || is != nil && is.Status == engine.ItemBlocked
	})
	if story == nil {
		return nil, nil
	}
	it := s.item(*story)
	return &it, nil
}

// Prepare puts the main tree on the feature branch, creating it from the
// current branch the first time.
func (s *PRD) Prepare(ctx context.Context, it *engine.Item, st *engine.State) (engine.Workspace, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.onBranch {
		// Once per run: Verify and Accept check the branch (the guard).
		if err := s.toBranch(ctx); err != nil {
			return engine.Workspace{}, err
		}
		head := s.resumedTip
		if head == "" {
			var err error
			if head, err = s.Git.Head(ctx); err != nil {
				return engine.Workspace{}, err
			}
		}
		s.guard.recordTip(head)
	}
	// The guard's tip is where HEAD is when an item starts (ralph's last
	// commit, or where a blocked item put the branch back): a new item's
	// base needs no git call.
	return engine.Workspace{Dir: s.Git.Dir, Base: s.guard.known("")}, nil
}

// toBranch puts the main tree on the feature branch. Called with s.mu held.
func (s *prdDoc) toBranch(ctx context.Context) error {
	cur, err := s.Git.CurrentBranch(ctx)
	if err != nil {
		return err
	}
	if cur != s.Branch {
		if !s.Git.HasCommits(ctx) {
			return usage.Errorf("the repository has no commits yet: make a first commit so ralph can branch %s from it", s.Branch)
		}
		if !s.Git.BranchExists(ctx, s.Branch) {
			if err := s.Git.CheckRefName(ctx, s.Branch); err != nil {
				return usage.Errorf("branch_name in %s: %v", s.File, err)
			}
			if err := s.Git.CreateBranch(ctx, s.Branch, ""); err != nil {
				return err
			}
		}
		if err := s.Git.Checkout(ctx, s.Branch); err != nil {
			return fmt.Errorf("switching to %s: %w", s.Branch, err)
		}
	}
	s.onBranch = true
	return nil
}

// Verify checks the branch (the guard: on the feature branch, no earlier
// commit dropped), restores the control plane, then checks the claim and
// runs the gates on a snapshot of the tree that would be committed.
func (s *PRD) Verify(ctx context.Context, a *engine.Attempt, st *engine.State) engine.Verdict {
	repo := s.Git.At(a.Dir)
	t, gerr := s.guard.check(ctx, repo, s.Branch, baseOf(st, a.Item.ID), a.Item.ID, st.RunID, st.Preexisting)
	tampered, claimedInFile := s.restore(a.Item.ID)
	if gerr != nil {
		return engine.Verdict{Tampered: tampered, Summary: "checking the branch failed", Failure: gerr.Error()}
	}
	if t != nil {
		return engine.Verdict{Claimed: a.Claimed || claimedInFile, Tampered: append([]string{t.report}, tampered...),
			Summary: "tampering: " + t.report, Failure: t.failure}
	}
	gates, allow := s.gatesOf(a.Item.ID)
	gt, ferr := s.files.check(ctx, repo, s.guard.known(baseOf(st, a.Item.ID)), gates, allow)
	tampered = append(tampered, gt...)
	if ferr != nil {
		return engine.Verdict{Tampered: tampered, Summary: "checking the gates' files failed", Failure: ferr.Error()}
	}
	ctx = withJudging(ctx, judging{baseline: s.baseline, base: s.guard.known(baseOf(st, a.Item.ID)), allowTestChanges: s.allowTestChanges(a.Item.ID), since: st.EnvSince(), outputs: &s.outputs})
	v := judgeTree(ctx, repo, st.Preexisting, a, a.Claimed || claimedInFile, s.unclaimed(a), s.Gates, gates, true)
	v = s.guard.settle(ctx, repo, a, v, st.Preexisting)
	v.Tampered = append(tampered, v.Tampered...)
	return v
}

func baseOf(st *engine.State, id string) string {
	if is := st.Items[id]; is != nil {
		return is.BaseHead
	}
	return ""
}

// Accept commits the verified tree as one commit on the feature branch,
// with the story marked passed in the PRD. The guard runs again first,
// and the tree must still be the one the gates ran on: anything that
// moved since is rejected, never committed.
func (s *PRD) Accept(ctx context.Context, a *engine.Attempt, v engine.Verdict, st *engine.State) (string, error) {
	id := a.Item.ID
	sha, err := s.guard.commitVerified(ctx, s.Git.At(a.Dir), s.Branch, a, v, st, storyMessage(a, v.Summary, st.RunID), true,
		func() ([]string, error) { return s.committed(), s.setPassed(id, true) })
	if err != nil {
		s.restore(id) // the guard may have reset the tree: the PRD file is the model's again
	} else {
		s.baseline.Advance(sha, v)
	}
	return sha, err
}

// Recover reports whether a story's commit landed before a crash.
func (s *PRD) Recover(ctx context.Context, it *engine.Item, st *engine.State) (string, bool, error) {
	if sha := committedIn(ctx, s.Git, "HEAD", storyTrailer, it.ID, st.RunID); sha != "" {
		s.recovered(ctx, sha)
		return sha, true, s.setPassed(it.ID, true)
	}
	return "", false, s.setPassed(it.ID, false)
}

// recovered moves the branch's known tip to sha, a commit of this run
// that landed before the crash, after the newest one the saved state
// knew: also for the run's first Prepare, which starts the guard from
// resumedTip and would otherwise take sha for an agent's commit and reset
// the branch without it.
func (s *PRD) recovered(ctx context.Context, sha string) {
	s.mu.Lock()
	if s.resumedTip == "" || s.Git.IsAncestor(ctx, s.resumedTip, sha) {
		s.resumedTip = sha
	}
	s.mu.Unlock()
	s.guard.recordTip(sha)
}

// Block keeps the story's unfinished work on a side branch for a person
// and returns the feature branch to where the story started.
func (s *PRD) Block(ctx context.Context, it *engine.Item, st *engine.State, reason string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	base := st.Items[it.ID].BaseHead
	if base == "" {
		return nil
	}
	msg := commitMessage(fmt.Sprintf("wip(%s): %s (blocked)", it.ID, it.Title), nil, "", "Ralph-Blocked: "+it.ID, "Reason: "+reason)
	if _, err := parkWork(ctx, s.Git, "blocked", it.ID, st.RunID, st.Preexisting, msg, true); err != nil {
		return err
	}
	if err := s.Git.Checkout(ctx, s.Branch); err != nil {
		return err
	}
	if err := s.Git.ResetHard(ctx, base); err != nil {
		return err
	}
	return s.write()
}

// Close has nothing to tidy: the sequential run leaves no trees behind.
func (s *PRD) Close(*engine.State) error { return nil }
