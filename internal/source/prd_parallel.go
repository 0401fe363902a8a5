package source

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/gate"
	"github.com/ralph-loop/ralph/internal/git"
)

// Parallel mode: each story works in its own worktree under
// .ralph/worktrees/<story> on branch ralph/<feature>-stories/<story>, cut from the
// feature branch's tip. A verified story is squash-merged onto the feature
// branch in the main tree, and the gates run again on that integrated tree
// before the commit is made: a commit on the feature branch always means
// "passed after integration", and a crash mid-merge leaves no commit.

// WorktreeDir is where a story's worktree lives.
func (s *PRD) WorktreeDir(id string) string {
	return filepath.Join(s.Git.Dir, ".ralph", "worktrees", git.Slug(id, 60))
}

// StoryBranch is the branch of a story's worktree: ralph/<feature>-stories/<story>.
// (Not ralph/<feature>/<story>: git cannot hold a branch ralph/<feature> and
// branches below it at once, and the feature branch is often ralph/<feature>.)
func (s *PRD) StoryBranch(id string) string {
	return "ralph/" + git.Slug(strings.TrimPrefix(s.Branch, "ralph/"), 60) + "-stories/" + git.Slug(id, 60)
}

func (s *PRD) prepareWorktree(ctx context.Context, it *engine.Item) (string, error) {
	// Only the first call touches the main tree; worktrees are created
	// outside the lock (each only writes its own branch and folder), so a
	// merge in progress does not hold up a story's start.
	s.mu.Lock()
	if !s.onBranch {
		if _, err := s.prepareMain(ctx); err != nil {
			s.mu.Unlock()
			return "", err
		}
	}
	if !s.pruned {
		_ = s.Git.WorktreePrune(ctx) // once per run: forget folders removed by hand
		s.pruned = true
	}
	s.mu.Unlock()
	dir := s.WorktreeDir(it.ID)
	if _, err := os.Stat(filepath.Join(dir, ".git")); err == nil {
		return dir, nil // a retry, or a resume after a crash: reattach
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", err
	}
	if !s.reuseWorktree(ctx, dir, it.ID) {
		if err := s.Git.WorktreeAdd(ctx, dir, s.StoryBranch(it.ID), s.Branch); err != nil {
			return "", fmt.Errorf("creating the worktree for %s: %w", it.ID, err)
		}
	}
	if rel, err := filepath.Rel(s.Git.Dir, s.File); err == nil && !strings.HasPrefix(rel, "..") {
		if b, err := os.ReadFile(filepath.Join(dir, rel)); err == nil {
			s.mu.Lock()
			if s.branchPRD == nil {
				s.branchPRD = map[string][]byte{}
			}
			s.branchPRD[it.ID] = b
			s.mu.Unlock()
		}
	}
	return dir, nil
}

// restoreWorktree checks the agent's copy of the PRD in a worktree against
// the harness's model, then puts the branch's own version back: a story
// branch never carries PRD changes (the harness writes passes in the main
// tree when the story merges).
func (s *PRD) restoreWorktree(ctx context.Context, dir, current string) (tampered []string, claimed bool) {
	rel, err := filepath.Rel(s.Git.Dir, s.File)
	if err != nil || strings.HasPrefix(rel, "..") {
		return nil, false
	}
	wfile := filepath.Join(dir, rel)
	b, err := os.ReadFile(wfile)
	if err != nil {
		return nil, false
	}
	s.mu.Lock()
	orig, cached := s.branchPRD[current]
	if cached && bytes.Equal(orig, b) {
		s.mu.Unlock()
		return nil, false // untouched
	}
	tampered, claimed = s.compare(b, current)
	s.mu.Unlock()
	if cached {
		_ = os.WriteFile(wfile, orig, 0o644)
		return tampered, claimed
	}
	wt := s.Git.At(dir)
	if _, err := wt.Run(ctx, "cat-file", "-e", "HEAD:"+rel); err == nil {
		_, _ = wt.Run(ctx, "checkout", "HEAD", "--", rel)
	} else {
		_ = os.Remove(wfile)
	}
	return tampered, claimed
}

// conflictMarkers lists files in dir that still hold conflict markers.
func conflictMarkers(ctx context.Context, wt *git.Repo) []string {
	out, err := wt.Run(ctx, "diff", "--name-only", "--diff-filter=U")
	var paths []string
	if err == nil && strings.TrimSpace(out) != "" {
		paths = strings.Split(strings.TrimSpace(out), "\n")
	}
	var left []string
	for _, p := range paths {
		b, err := os.ReadFile(filepath.Join(wt.Dir, p))
		if err == nil && strings.Contains(string(b), "<<<<<<< ") && strings.Contains(string(b), ">>>>>>> ") {
			left = append(left, p)
		}
	}
	return left
}

// acceptParallel squash-merges the story branch onto the feature branch
// and re-runs the gates on the integrated tree.
func (s *PRD) acceptParallel(ctx context.Context, a *engine.Attempt, v engine.Verdict, st *engine.State) (string, error) {
	id := a.Item.ID
	wt := s.Git.At(a.Dir) // staged already (engine.Stager)
	s.mu.Lock()
	defer s.mu.Unlock()
	main := s.Git
	pre := s.tip
	if pre == "" {
		var err error
		if pre, err = main.Head(ctx); err != nil {
			return "", err
		}
	}
	branch := s.StoryBranch(id)
	if err := main.MergeSquash(ctx, branch); err != nil {
		_ = main.ResetHard(ctx, pre)
		var ce *git.ConflictError
		if !errors.As(err, &ce) {
			return "", err
		}
		return "", s.conflictInWorktree(ctx, wt, id, ce)
	}
	s.Doc.MarkPassed(id)
	if err := s.write(); err != nil {
		return "", err
	}
	// The squash staged the story's changes; only the PRD's write-back is
	// left (a full `add --all` would scan the whole tree in the queue).
	if err := main.AddPaths(ctx, s.File); err != nil {
		return "", err
	}
	results, ok := s.Gates.Run(ctx, main.Dir, prdGates(s.Doc, id), a.Log)
	if !ok {
		_ = main.ResetHard(ctx, pre)
		s.unmark(id)
		return "", &engine.Rejected{
			Summary: "integrated gates failed after the squash merge: " + gate.Summary(results),
			Failure: "Your branch passed its gates alone, but after squash-merging it onto the current feature branch the gates failed on the integrated tree (the merge was undone). Other stories merged since you started; bring your work in line with them.\n\n" + gate.FailureContext(results, 4<<10),
		}
	}
	msg := CommitMessage(fmt.Sprintf("feat(%s): %s", id, a.Item.Title), a.Learnings, v.Summary+"; integrated gates: "+gate.Summary(results),
		"Ralph-Story: "+id, "Ralph-Run: "+st.RunID)
	sha, err := main.Commit(ctx, msg, true)
	if err != nil {
		_ = main.ResetHard(ctx, pre)
		s.unmark(id)
		return "", err
	}
	s.tip = sha
	return sha, nil
}

// stageWorktree records the story's work (and a resolved merge) on its
// branch. Idempotent: with nothing new it commits nothing.
func (s *PRD) stageWorktree(ctx context.Context, a *engine.Attempt, v engine.Verdict) error {
	wt := s.Git.At(a.Dir)
	if err := wt.AddAllExcept(ctx, nil); err != nil {
		return err
	}
	// Always a commit (empty when nothing changed): one call instead of
	// asking first whether there is anything to commit.
	if err := wt.CommitOnly(ctx, CommitMessage(fmt.Sprintf("wip(%s): %s", a.Item.ID, a.Item.Title), a.Learnings, v.Summary, "Ralph-Story-Branch: "+a.Item.ID), true); err != nil {
		return err
	}
	s.mu.Lock()
	delete(s.merging, a.Item.ID)
	s.mu.Unlock()
	return nil
}

// Stage commits the worktree's work before the merge queue (engine.Stager).
func (s *PRD) Stage(ctx context.Context, a *engine.Attempt, v engine.Verdict) error {
	if !s.Parallel {
		return nil
	}
	return s.stageWorktree(ctx, a, v)
}

// Cleanup retires a merged story's worktree and deletes its branch
// (engine.Cleaner). The worktree is parked as .ralph/worktrees/.idle-<story>
// for the next story: switching a checkout to a new branch rewrites only
// the files that differ, where a fresh worktree writes every file.
func (s *PRD) Cleanup(ctx context.Context, a *engine.Attempt) {
	if !s.Parallel {
		return
	}
	idle := filepath.Join(filepath.Dir(a.Dir), ".idle-"+filepath.Base(a.Dir))
	wt := s.Git.At(a.Dir)
	if _, err := wt.Run(ctx, "checkout", "--quiet", "--detach"); err != nil || s.Git.WorktreeMove(ctx, a.Dir, idle) != nil {
		_ = s.Git.WorktreeRemove(ctx, a.Dir)
	}
	_ = s.Git.DeleteBranch(ctx, s.StoryBranch(a.Item.ID))
}

// reuseWorktree moves a parked worktree to dir and puts it on the story's
// new branch at the feature tip, clean. On any failure the parked worktree
// is removed and false is returned (the caller adds a fresh one).
func (s *PRD) reuseWorktree(ctx context.Context, dir, id string) bool {
	s.mu.Lock()
	entries, _ := os.ReadDir(filepath.Dir(dir))
	idle := ""
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".idle-") && !s.claimedIdle[e.Name()] {
			idle = filepath.Join(filepath.Dir(dir), e.Name())
			if s.claimedIdle == nil {
				s.claimedIdle = map[string]bool{}
			}
			s.claimedIdle[e.Name()] = true
			break
		}
	}
	s.mu.Unlock()
	if idle == "" {
		return false
	}
	defer func() {
		s.mu.Lock()
		delete(s.claimedIdle, filepath.Base(idle))
		s.mu.Unlock()
	}()
	if err := s.Git.WorktreeMove(ctx, idle, dir); err != nil {
		_ = s.Git.WorktreeRemove(ctx, idle)
		return false
	}
	wt := s.Git.At(dir)
	if _, err := wt.Run(ctx, "checkout", "--quiet", "--force", "-B", s.StoryBranch(id), s.Branch); err == nil {
		if _, err := wt.Run(ctx, "clean", "-fdxq"); err == nil {
			return true
		}
	}
	_ = s.Git.WorktreeRemove(ctx, dir)
	return false
}

func (s *PRD) unmark(id string) {
	if st := s.Doc.Story(id); st != nil {
		st.Passes = false
	}
	_ = s.write()
}

// conflictInWorktree merges the feature tip into the story's worktree so
// the conflict is there for a resolver, and describes it.
func (s *PRD) conflictInWorktree(ctx context.Context, wt *git.Repo, id string, ce *git.ConflictError) error {
	if s.merging == nil {
		s.merging = map[string]bool{}
	}
	s.merging[id] = true
	_, err := wt.Run(ctx, "merge", "--no-ff", "--no-commit", s.Branch)
	if err == nil {
		// Git merged it cleanly into the story branch after all: commit and
		// let the resolver (or a plain retry) verify.
		_, _ = wt.Commit(ctx, fmt.Sprintf("merge %s into %s\n", s.Branch, s.StoryBranch(id)), true)
	}
	paths := conflictMarkers(ctx, wt)
	if len(paths) == 0 {
		paths = ce.Paths
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Story branch %s and feature branch %s changed the same lines. ", s.StoryBranch(id), s.Branch)
	b.WriteString("\"ours\" (HEAD) is this story's work; \"theirs\" is what other stories merged meanwhile.\n\nConflicted files:\n")
	for _, p := range paths {
		fmt.Fprintf(&b, "\n### %s\n\n```\n", p)
		content, _ := os.ReadFile(filepath.Join(wt.Dir, p))
		b.WriteString(gate.Trim(hunks(string(content)), 3000))
		b.WriteString("\n```\n")
	}
	return &engine.Conflict{Paths: paths, Context: b.String()}
}

// hunks keeps the conflict regions of a file with a little context.
func hunks(s string) string {
	lines := strings.Split(s, "\n")
	keep := make([]bool, len(lines))
	in := false
	for i, l := range lines {
		if strings.HasPrefix(l, "<<<<<<< ") {
			in = true
			for j := max(0, i-3); j < i; j++ {
				keep[j] = true
			}
		}
		if in {
			keep[i] = true
		}
		if strings.HasPrefix(l, ">>>>>>> ") {
			in = false
			for j := i + 1; j < min(len(lines), i+4); j++ {
				keep[j] = true
			}
		}
	}
	var out []string
	gap := false
	for i, l := range lines {
		if keep[i] {
			out = append(out, l)
			gap = false
		} else if !gap {
			out = append(out, "…")
			gap = true
		}
	}
	return strings.Join(out, "\n")
}

// recoverParallel finds whether a story's squash commit landed, and
// otherwise clears a half-done merge from the main tree.
func (s *PRD) recoverParallel(ctx context.Context, it *engine.Item, st *engine.State) (string, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sha := s.Git.FindTrailer(ctx, s.Branch, 500, "Ralph-Story", it.ID, "Ralph-Run", st.RunID); sha != "" {
		s.Doc.MarkPassed(it.ID)
		return sha, true, s.write()
	}
	if err := s.Git.ResetHard(ctx, "HEAD"); err != nil {
		return "", false, err
	}
	s.tip = ""
	return "", false, s.write()
}

// Stopped removes the parked worktrees when the run ends
// (engine.StopObserver): only running or blocked stories keep theirs.
func (s *PRD) Stopped(st *engine.State) {
	if !s.Parallel {
		return
	}
	root := filepath.Join(s.Git.Dir, ".ralph", "worktrees")
	entries, _ := os.ReadDir(root)
	ctx := context.Background()
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".idle-") {
			dir := filepath.Join(root, e.Name())
			if err := s.Git.WorktreeRemove(ctx, dir); err != nil {
				_ = os.RemoveAll(dir)
			}
		}
	}
	_ = s.Git.WorktreePrune(ctx)
}
