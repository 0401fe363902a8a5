package source

import (
	"context"
	"fmt"

	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/gate"
	"github.com/ralph-loop/ralph/internal/git"
)

// PRD runs the stories of a prd.json one at a time in the main work tree,
// on one feature branch, one commit per story.
type PRD struct {
	*prdDoc
}

// OpenPRD loads and validates path for a sequential run.
func OpenPRD(path string, repo *git.Repo, gates gate.Runner) (*PRD, error) {
	d, err := openPRDDoc(path, repo, gates)
	if err != nil {
		return nil, err
	}
	return &PRD{d}, nil
}

// Next is the first ready story by priority, then file order.
func (s *PRD) Next(st *engine.State, busy map[string]bool) (*engine.Item, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	story := s.Doc.NextStory(st.Passed(), excluded(st, busy))
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
		// Checked once per run; Accept checks again before it commits, in
		// case the agent switched branches.
		if err := s.toBranch(ctx); err != nil {
			return engine.Workspace{}, err
		}
	}
	return engine.Workspace{Dir: s.Git.Dir}, nil
}

// toBranch puts the main tree on the feature branch. Called with s.mu held.
func (s *prdDoc) toBranch(ctx context.Context) error {
	cur, err := s.Git.CurrentBranch(ctx)
	if err != nil {
		return err
	}
	if cur != s.Branch {
		if !s.Git.HasCommits(ctx) {
			return engine.UsageError("the repository has no commits yet: make a first commit so ralph can branch %s from it", s.Branch)
		}
		if !s.Git.BranchExists(ctx, s.Branch) {
			if err := s.Git.CheckRefName(ctx, s.Branch); err != nil {
				return engine.UsageError("branch_name in %s: %v", s.File, err)
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

// Verify restores the control plane, then checks the claim and runs the
// gates on the tree that would be committed.
func (s *PRD) Verify(ctx context.Context, a *engine.Attempt, st *engine.State) engine.Verdict {
	tampered, claimedInFile := s.restore(a.Item.ID)
	return s.judge(ctx, a, claimedInFile, tampered)
}

// Accept marks the story passed in the PRD and commits everything the
// iteration changed as one commit on the feature branch.
func (s *PRD) Accept(ctx context.Context, a *engine.Attempt, v engine.Verdict, st *engine.State) (string, error) {
	s.mu.Lock()
	err := s.toBranch(ctx)
	s.mu.Unlock()
	if err != nil {
		return "", err
	}
	id := a.Item.ID
	if err := s.setPassed(id, true); err != nil {
		return "", err
	}
	sha, _, err := commitWork(ctx, s.Git.At(a.Dir), st.Items[id].BaseHead, st.Preexisting, storyMessage(a, v.Summary, st.RunID), true)
	return sha, err
}

// Recover reports whether a story's commit landed before a crash.
func (s *PRD) Recover(ctx context.Context, it *engine.Item, st *engine.State) (string, bool, error) {
	if sha := committedIn(ctx, s.Git, "HEAD", StoryTrailer, it.ID, st.RunID); sha != "" {
		return sha, true, s.setPassed(it.ID, true)
	}
	return "", false, s.setPassed(it.ID, false)
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
	side := "ralph/blocked/" + git.Slug(it.ID, 40) + "-" + st.RunID
	for n := 2; s.Git.BranchExists(ctx, side); n++ {
		side = fmt.Sprintf("ralph/blocked/%s-%s-%d", git.Slug(it.ID, 40), st.RunID, n)
	}
	if err := s.Git.CreateBranch(ctx, side, ""); err != nil {
		return err
	}
	if err := s.Git.Checkout(ctx, side); err != nil {
		return err
	}
	msg := CommitMessage(fmt.Sprintf("wip(%s): %s (blocked)", it.ID, it.Title), nil, "", "Ralph-Blocked: "+it.ID, "Reason: "+reason)
	if _, _, err := commitWork(ctx, s.Git, "", st.Preexisting, msg, true); err != nil {
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
func (s *PRD) Close(*engine.State) {}
