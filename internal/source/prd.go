package source

import (
	"context"
	"fmt"

	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/gate"
	"github.com/ralph-loop/ralph/internal/git"
	"github.com/ralph-loop/ralph/internal/judge"
	"github.com/ralph-loop/ralph/internal/usage"
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
	return &PRD{prdDoc: d}, nil
}

// Next is the first ready story by priority, then file order.
func (s *PRD) Next(st *engine.State, busy map[string]bool) (*engine.Item, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	story := s.Doc.NextStoryBy(func(id string) bool {
		// (a story marked by hand is work: an agent verifies it)
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
// current branch the first time. Once a story's commit landed, the main
// tree takes the index it was recorded in and the PRD's write-back.
func (s *PRD) Prepare(ctx context.Context, it *engine.Item, st *engine.State) (engine.Workspace, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.onBranch {
		if err := s.toBranch(ctx); err != nil {
			return engine.Workspace{}, err
		}
	}
	return engine.Workspace{Dir: s.Git.Dir, Base: s.storyBase(ctx, it.ID, st), Follow: s.followMain(it.ID)}, nil
}

// storyBase is where story id's work starts: its first iteration's base
// while no other story landed after it (its earlier iterations' commits
// are its work, judged with the rest), else the branch as it is now (a
// blocked story retried after others landed starts again from their
// tip). Under mu.
func (s *PRD) storyBase(ctx context.Context, id string, st *engine.State) string {
	tip := s.resumedTip
	if is := st.Items[id]; is != nil && is.BaseHead != "" && (tip == "" || s.Git.IsAncestor(ctx, tip, is.BaseHead)) {
		return is.BaseHead
	}
	head, _ := s.Git.Head(ctx)
	return head
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

// Terms are a story's: the PRD's gates and its checks and flags, the
// feature branch, its commit message and the PRD's write-back.
func (s *prdDoc) Terms(it *engine.Item, st *engine.State) judge.Claim {
	return s.terms(it, st)
}

// Claim puts the PRD file back as the harness wrote it (an agent that set
// its story's passes claimed it; any other edit is reported) and gives
// the story's terms.
func (s *PRD) Claim(ctx context.Context, a *engine.Attempt, st *engine.State) judge.Claim {
	c := s.terms(a.Item, st)
	var claimed bool
	c.Tampered, claimed = s.restore(a.Item.ID)
	c.Claimed = claimed
	c.Body = a.Learnings
	c.Unclaimed = s.unclaimed(a)
	return c
}

// followMain brings the main tree along once story id's commit landed: it
// takes the index the work was recorded in (exactly the commit, with the
// files' stats) and the PRD's write-back is written into the tree.
func (s *prdDoc) followMain(id string) func(ctx context.Context, v engine.Verdict, old, landed string) error {
	return func(ctx context.Context, v engine.Verdict, old, landed string) error {
		if err := followTree(ctx, s.Git, v, landed); err != nil {
			return err
		}
		s.landedOn(ctx, old, landed)
		return s.setPassed(id, true)
	}
}

// Landed has nothing more to do: the main tree followed the commit.
func (s *PRD) Landed(context.Context, *engine.Attempt, engine.Verdict, string, *engine.State) error {
	return nil
}

func baseOf(st *engine.State, id string) string {
	if is := st.Items[id]; is != nil {
		return is.BaseHead
	}
	return ""
}

// Recover reports whether a story's commit landed before a crash.
func (s *PRD) Recover(ctx context.Context, it *engine.Item, st *engine.State) (string, bool, error) {
	if sha := committedIn(ctx, s.Git, s.Branch, storyTrailer, it.ID, st.RunID); sha != "" {
		s.recovered(ctx, sha)
		if err := s.followRecovered(ctx); err != nil {
			return "", false, err
		}
		return sha, true, s.setPassed(it.ID, true)
	}
	return "", false, s.setPassed(it.ID, false)
}

// recovered makes sha, a commit of this run that landed (before a crash,
// or just now), the newest the run knows on the branch.
func (s *prdDoc) recovered(ctx context.Context, sha string) {
	s.mu.Lock()
	if s.resumedTip == "" || s.Git.IsAncestor(ctx, s.resumedTip, sha) {
		s.resumedTip = sha
	}
	s.mu.Unlock()
}

// landedOn is recovered for a commit the lander made on old (its
// parent): when old is the newest known, no git is asked.
func (s *prdDoc) landedOn(ctx context.Context, old, sha string) {
	s.mu.Lock()
	next := old != "" && s.resumedTip == old
	if next {
		s.resumedTip = sha
	}
	s.mu.Unlock()
	if !next {
		s.recovered(ctx, sha)
	}
}

// followRecovered brings the main tree, on the branch a recovered commit
// landed on, along as following the landing would have (the crash may
// have come between the two): the tree holds the work, and the index
// becomes the commit's.
func (s *prdDoc) followRecovered(ctx context.Context) error {
	return s.Git.ResetIndex(ctx)
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
