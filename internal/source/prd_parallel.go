package source

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/gate"
	"github.com/ralph-loop/ralph/internal/git"
	"github.com/ralph-loop/ralph/internal/judge"
)

// ParallelPRD runs the stories of a prd.json at once, each in its own
// worktree under .ralph/worktrees/<story> on branch
// ralph/<feature>-stories/<story>, cut from the feature branch's tip. A
// verified story is squash-merged onto the feature branch in the main tree,
// and the gates run again on that integrated tree before the commit is
// made: a commit on the feature branch always means "passed after
// integration", and a crash mid-merge leaves no commit.
type ParallelPRD struct {
	*prdDoc
	waiting map[string]int // per story, how many stories wait on it (under mu)

	// Bookkeeping, under wmu (never held across a git call, so preparing
	// and verifying worktrees never wait for a merge).
	wmu       sync.Mutex
	wtAdmin   sync.RWMutex // worktree adds vs. commands that list worktrees
	mainReady bool         // main tree on Branch and stale worktrees pruned
	tip       string       // the feature branch's head after the last landing
	// branchPRD holds each worktree's PRD bytes as cut, so restoring the
	// agent's copy needs no git call; merging marks worktrees in a merge.
	branchPRD map[string][]byte
	merging   map[string]string // story → the feature tip merged into its tree for a resolver
	// trees is the worktrees' lifecycle (see treeState); merged are the
	// merged stories' branches, deleted in one call when the run stops;
	// bases are the tips worktrees were cut at; dropped are stories whose
	// tree, readied ahead, another story took (their branch holds only an
	// old base: cut anew when they start, deleted at the end if not).
	trees   *treeTable
	merged  []string
	bases   map[string]string
	dropped map[string]bool
	// pause, when set (tests), is called at named points of the lifecycle
	// to force an interleaving.
	pause func(point string)
	// slugs are the stories' unique names (see slug), made once.
	slugOnce sync.Once
	slugs    map[string]string
}

// OpenParallelPRD loads and validates path for a parallel run.
func OpenParallelPRD(path string, repo *git.Repo, gates gate.Runner) (*ParallelPRD, error) {
	d, err := openPRDDoc(path, repo, gates)
	if err != nil {
		return nil, err
	}
	s := &ParallelPRD{prdDoc: d}
	s.trees = newTreeTable(filepath.Join(repo.Dir, ".ralph", "worktrees.jsonl"))
	return s, nil
}

// Next is the best ready story: priority, then the one more stories wait
// on (directly or not), then file order.
func (s *ParallelPRD) Next(st *engine.State, busy map[string]bool) (*engine.Item, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.waiting == nil {
		s.waiting = s.Doc.Dependents() // the graph is fixed for the run
	}
	ready := s.Doc.ReadyStoriesUnblockingFirst(st.Passed(), excluded(st, busy), s.waiting)
	if len(ready) == 0 {
		return nil, nil
	}
	it := s.item(*ready[0])
	return &it, nil
}

// Prepare gives the story its worktree: the one it had (a retry, or a
// resume after a crash), one readied for it, or a new one.
func (s *ParallelPRD) Prepare(ctx context.Context, it *engine.Item, st *engine.State) (engine.Workspace, error) {
	dir, err := s.prepareWorktree(ctx, it)
	if err != nil {
		return engine.Workspace{}, err
	}
	s.wmu.Lock()
	base := s.bases[it.ID]
	s.wmu.Unlock()
	return engine.Workspace{Dir: dir, Base: base, Isolated: true, Follow: s.followMain}, nil
}

// WorktreeDir is where a story's worktree lives.
func (s *ParallelPRD) WorktreeDir(id string) string {
	return filepath.Join(s.worktreesDir(), s.slug(id))
}

// worktreesDir holds every worktree ralph makes for the run's stories:
// nothing outside it is ever repaired or removed as one of them.
func (s *ParallelPRD) worktreesDir() string {
	return filepath.Join(s.Git.Dir, ".ralph", "worktrees")
}

// FeatureBranch is the branch the stories are merged into.
func (s *ParallelPRD) FeatureBranch() string { return s.Branch }

// StoryBranch is the branch of a story's worktree: ralph/<feature>-stories/<story>.
// (Not ralph/<feature>/<story>: git cannot hold a branch ralph/<feature> and
// branches below it at once, and the feature branch is often ralph/<feature>.)
func (s *ParallelPRD) StoryBranch(id string) string {
	return s.storyPrefix() + s.slug(id)
}

// slug is a story's name in its worktree folder and branch: the id made
// safe for git, unique among the PRD's stories (ids that would make the
// same slug, A.1, A-1 and a_1, each get a short hash of the id).
func (s *ParallelPRD) slug(id string) string {
	s.slugOnce.Do(func() {
		count := map[string]int{}
		for _, st := range s.Doc.Stories {
			count[git.Slug(st.ID, 60)]++
		}
		s.slugs = map[string]string{}
		for _, st := range s.Doc.Stories {
			sl := git.Slug(st.ID, 60)
			if count[sl] > 1 {
				sum := sha256.Sum256([]byte(st.ID))
				sl = git.Slug(st.ID, 52) + "-" + hex.EncodeToString(sum[:3])
			}
			s.slugs[st.ID] = sl
		}
	})
	if sl, ok := s.slugs[id]; ok {
		return sl
	}
	return git.Slug(id, 60)
}

// storyPrefix is the folder of this PRD's story branches.
func (s *ParallelPRD) storyPrefix() string {
	return "ralph/" + git.Slug(strings.TrimPrefix(s.Branch, "ralph/"), 60) + "-stories/"
}

func (s *ParallelPRD) prepareWorktree(ctx context.Context, it *engine.Item) (string, error) {
	// Only the first call touches the main tree; worktrees are created
	// outside the merge's way (each only writes its own branch and folder),
	// so a merge in progress does not hold up a story's start.
	s.wmu.Lock()
	ready := s.mainReady
	s.wmu.Unlock()
	if !ready {
		s.mu.Lock()
		if !s.onBranch {
			if err := s.toBranch(ctx); err != nil {
				s.mu.Unlock()
				return "", err
			}
		}
		s.wmu.Lock()
		ready = s.mainReady
		s.wmu.Unlock()
		if !ready {
			s.repairTrees(ctx)
		}
		s.mu.Unlock()
	}
	id := it.ID
	dir := s.WorktreeDir(id)
	switch s.trees.claimForStart(id) {
	case treeReady:
		return dir, s.refresh(ctx, dir, id)
	case treeRunning:
		if statDir(dir) {
			return dir, nil // a retry, or a resume after a crash: reattach
		}
		// Its folder was removed by hand: cut a new one.
		_ = s.trees.move(id, treeNone, treeRunning)
		if err := s.trees.move(id, treeCutting, treeNone); err != nil {
			return "", err
		}
	}
	// The tree is ours, cutting.
	err := os.MkdirAll(filepath.Dir(dir), 0o755)
	if err == nil {
		err = s.cutWorktree(ctx, dir, id, "")
	}
	if err != nil {
		_ = s.trees.move(id, treeNone, treeCutting)
		return "", fmt.Errorf("creating the worktree for %s: %w", id, err)
	}
	return dir, s.trees.move(id, treeRunning, treeCutting)
}

// cutWorktree puts a worktree for story id at dir (the caller holds it,
// cutting), on the story's branch at the tip this run last merged (a
// commit, not the branch name: the story's base stays what the engine
// records even if a merge lands meanwhile; before the first merge, at the
// branch's tip as it is now). It reuses the taken tree of story idle if
// given, else an idle tree (reuseWorktree), else adds a fresh one.
func (s *ParallelPRD) cutWorktree(ctx context.Context, dir, id, idle string) error {
	s.wmu.Lock()
	base := s.tip
	dropped := s.dropped[id]
	delete(s.dropped, id)
	s.wmu.Unlock()
	start := base
	if start == "" {
		// The base is a commit of the feature branch even when the add
		// attaches the story's existing branch as it is (a story run
		// again: its tree's head is then that branch's, and the merge
		// queue would take it for a commit the feature branch lost).
		if tip, err := s.Git.RevParse(ctx, "refs/heads/"+s.Branch); err == nil {
			base, start = tip, tip
		} else {
			start = s.Branch
		}
	}
	if !s.reuseWorktree(ctx, dir, id, start, idle) {
		add := s.Git.WorktreeAdd
		if dropped {
			add = s.Git.WorktreeAddReset // its branch holds only an old base
		}
		err := s.addingWorktree(func() error {
			// An add killed earlier (this path's own, in a crashed run)
			// left git's lock on the path: clear it or the add fails.
			_, _ = s.Git.RepairHalfAdded(ctx, dir)
			return add(ctx, dir, s.StoryBranch(id), start)
		})
		if err != nil {
			return err
		}
	}
	if base == "" {
		// Before this run's first merge: the tree's base is the branch's
		// tip it was cut at (the story's files are counted from it).
		base, _ = s.Git.At(dir).Head(ctx)
	}
	s.cut(dir, id, base)
	return nil
}

// cut records a story's new worktree: its base and the PRD as checked out
// there (so restoring the agent's copy needs no git call).
func (s *ParallelPRD) cut(dir, id, base string) {
	var b []byte
	if rel, err := filepath.Rel(s.Git.Dir, s.File); err == nil && !strings.HasPrefix(rel, "..") {
		b, _ = os.ReadFile(filepath.Join(dir, rel))
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.bases == nil {
		s.bases = map[string]string{}
	}
	if s.branchPRD == nil {
		s.branchPRD = map[string][]byte{}
	}
	if base != "" {
		s.bases[id] = base
	}
	if b != nil {
		s.branchPRD[id] = b
	}
}

// refresh moves a worktree readied ahead of its story's start to the
// current tip when merges landed since (one checkout; none if not).
func (s *ParallelPRD) refresh(ctx context.Context, dir, id string) error {
	s.wmu.Lock()
	base, tip := s.bases[id], s.tip
	s.wmu.Unlock()
	if tip == "" || tip == base {
		return nil
	}
	if err := s.switchWorktree(ctx, dir, id, tip); err != nil {
		return fmt.Errorf("bringing the worktree of %s to the feature tip: %w", id, err)
	}
	s.cut(dir, id, tip)
	return nil
}

// readyNext readies a parked worktree for the story most likely to start
// next — ready (its dependencies merged), no tree of its own, best by the
// scheduler's order — so that story's start needs at most a checkout.
// The story's tree is claimed (none to cutting) in one step of the
// lifecycle, so a story that started since the candidates were listed is
// skipped, never moved under.
func (s *ParallelPRD) readyNext(ctx context.Context) {
	idle, _ := s.trees.takeIdle(true)
	if idle == "" {
		return
	}
	s.mu.Lock()
	if s.waiting == nil {
		s.waiting = s.Doc.Dependents()
	}
	passed, exclude := map[string]bool{}, map[string]bool{}
	for _, st := range s.Doc.Stories {
		if st.Passes {
			passed[st.ID] = true
		} else if s.trees.state(st.ID) != treeNone {
			exclude[st.ID] = true // running, being cut, or blocked
		}
	}
	ready := s.Doc.ReadyStoriesUnblockingFirst(passed, exclude, s.waiting)
	s.mu.Unlock()
	if s.pause != nil {
		s.pause("readyNext: candidates listed")
	}
	for _, st := range ready {
		if s.trees.move(st.ID, treeCutting, treeNone) != nil {
			continue // started, or readied by another merge, meanwhile
		}
		if s.cutWorktree(ctx, s.WorktreeDir(st.ID), st.ID, idle) != nil {
			_ = s.trees.move(st.ID, treeNone, treeCutting)
			return
		}
		_ = s.trees.move(st.ID, treeReady, treeCutting)
		return
	}
	_ = s.trees.move(idle, treeParked, treeTaken) // nothing to ready: it stays parked
}

// Git writes a linked worktree's admin entry (.git/worktrees/<name>) as
// several files, one after another, in `worktree add`; a git command that
// lists the worktrees meanwhile (checkout and branch -D look where a branch
// is checked out, worktree move and remove look too) can read the entry
// half-made and fail. So adds run alone, and the commands that list
// worktrees run beside each other but never beside an add.
func (s *ParallelPRD) addingWorktree(fn func() error) error {
	s.wtAdmin.Lock()
	defer s.wtAdmin.Unlock()
	return fn()
}

// ListingWorktrees runs fn, a git command that reads every worktree's
// HEAD (worktree list, prune, a fetch's connectivity check), while no
// worktree is half-added.
func (s *ParallelPRD) ListingWorktrees(fn func() error) error {
	s.wtAdmin.RLock()
	defer s.wtAdmin.RUnlock()
	return fn()
}

// switchWorktree puts the worktree at dir on story id's branch at start;
// --force also discards tracked changes (untracked files were cleaned), so
// the tree is the branch's exactly.
func (s *ParallelPRD) switchWorktree(ctx context.Context, dir, id, start string) error {
	return s.ListingWorktrees(func() error {
		return s.Git.At(dir).ForceCheckoutBranch(ctx, s.StoryBranch(id), start)
	})
}

// removeWorktree removes the tree at dir, whatever git knows of it (a
// half-made tree may have no admin entry).
func (s *ParallelPRD) removeWorktree(ctx context.Context, dir string) {
	_ = s.ListingWorktrees(func() error {
		if s.Git.WorktreeRemove(ctx, dir) != nil {
			_ = os.RemoveAll(dir)
			return s.Git.WorktreePrune(ctx)
		}
		return nil
	})
}

// repairTrees runs once per run, with s.mu held, before the first story
// starts or — when none starts (a rerun that only recovered a commit, or
// found everything passed) — before Close: it forgets folders removed by
// hand and repairs what a crashed run left, so that Close knows every
// tree there is.
func (s *ParallelPRD) repairTrees(ctx context.Context) {
	// Only the merge queue writes the main tree: whatever a crashed run
	// left there uncommitted is a half-done merge (its story is merged
	// again or found committed by Recover), and would stop the next one.
	_ = s.Git.ResetHard(ctx, "HEAD")
	// A worktree add the crash killed left git's lock on its tree (prune
	// keeps locked trees, and a new add of the path fails): ralph's own
	// half-made trees go first. No add runs before this.
	_, _ = s.Git.RepairHalfAdded(ctx, s.worktreesDir())
	_ = s.ListingWorktrees(func() error { return s.Git.WorktreePrune(ctx) })
	s.resumeTrees(ctx)
	s.wmu.Lock()
	s.mainReady = true
	if s.resumedTip != "" {
		s.tip = s.resumedTip
	}
	s.wmu.Unlock()
}

// resumeTrees rebuilds the lifecycle from what a crashed or stopped run
// recorded (.ralph/worktrees.jsonl) and what is on disk, once per run:
// a tree left cutting or taken is half-made and removed (its branch, if
// the tree was readied ahead, is cut anew); so is a tree whose commit the
// repository does not have (a power cut lost it after the tree was cut);
// a ready tree stays ready for its story; a merged story's tree is
// cleaned and parked for reuse (or removed when it cannot be cleaned); any
// other story's tree is its own, running: its work is reattached. Called
// with s.mu held.
func (s *ParallelPRD) resumeTrees(ctx context.Context) {
	last, err := loadTreeLog(s.trees.log)
	if err != nil {
		last = map[string]treeState{} // unreadable: judge by what is on disk
	}
	for _, st := range s.Doc.Stories {
		id, dir := st.ID, s.WorktreeDir(st.ID)
		state := last[id]
		if !statDir(dir) {
			if _, err := os.Lstat(dir); err == nil {
				s.removeWorktree(ctx, dir) // a folder without its .git file
			}
			if state == treeCutting || state == treeTaken {
				s.markDropped(id) // its half-made tree was repaired away
			}
			continue
		}
		if st.Passes {
			state = treeParked
		}
		head, herr := s.Git.At(dir).RevParse(ctx, "HEAD")
		if herr != nil && state != treeCutting && state != treeTaken {
			state = treeCutting // its commit is lost: as good as half-made
		}
		switch state {
		case treeCutting, treeTaken:
			s.removeWorktree(ctx, dir)
			s.markDropped(id)
			continue
		case treeReady:
			s.wmu.Lock()
			if s.bases == nil {
				s.bases = map[string]string{}
			}
			s.bases[id] = head
			s.wmu.Unlock()
		case treeParked:
			// Merged: a crash may have come before tidy cleaned it.
			if last[id] != treeParked && s.Git.At(dir).CleanUntracked(ctx) != nil {
				s.removeWorktree(ctx, dir)
				continue
			}
			if st.Passes {
				s.wmu.Lock()
				s.merged = append(s.merged, s.StoryBranch(id))
				s.wmu.Unlock()
			}
		default:
			state = treeRunning
		}
		s.trees.mu.Lock()
		s.trees.trees[id] = state
		s.trees.mu.Unlock()
	}
	_ = s.trees.rewrite()
}

// markDropped records that story id's branch holds no work of its own.
func (s *ParallelPRD) markDropped(id string) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.dropped == nil {
		s.dropped = map[string]bool{}
	}
	s.dropped[id] = true
}

// restoreWorktree checks the agent's copy of the PRD in a worktree against
// the harness's model, then puts the branch's own version back: a story
// branch never carries PRD changes (the harness writes passes in the main
// tree when the story merges).
func (s *ParallelPRD) restoreWorktree(ctx context.Context, dir, current string) (tampered []string, claimed bool) {
	rel, err := filepath.Rel(s.Git.Dir, s.File)
	if err != nil || strings.HasPrefix(rel, "..") {
		return nil, false
	}
	wfile := filepath.Join(dir, rel)
	b, err := os.ReadFile(wfile)
	if err != nil {
		return nil, false
	}
	s.wmu.Lock()
	orig, cached := s.branchPRD[current]
	s.wmu.Unlock()
	if cached && bytes.Equal(orig, b) {
		return nil, false // untouched
	}
	s.mu.Lock()
	tampered, claimed = s.compare(b, current)
	s.mu.Unlock()
	if cached {
		_ = os.WriteFile(wfile, orig, 0o644)
		return tampered, claimed
	}
	wt := s.Git.At(dir)
	if wt.HasPath(ctx, "HEAD", rel) {
		_ = wt.RestorePath(ctx, "HEAD", rel)
	} else {
		_ = os.Remove(wfile)
	}
	return tampered, claimed
}

// conflictMarkers lists files in dir that still hold conflict markers.
func conflictMarkers(ctx context.Context, wt *git.Repo) []string {
	paths, _ := wt.UnmergedPaths(ctx)
	var left []string
	for _, p := range paths {
		b, err := os.ReadFile(filepath.Join(wt.Dir, p))
		if err == nil && strings.Contains(string(b), "<<<<<<< ") && strings.Contains(string(b), ">>>>>>> ") {
			left = append(left, p)
		}
	}
	return left
}

// Claim checks the agent's copy of the PRD in the story's worktree (a
// story branch never carries PRD changes: its passes is a claim, any
// other edit is put back) and leftover conflict markers after a merge
// ralph left for a resolver, and gives the story's terms.
func (s *ParallelPRD) Claim(ctx context.Context, a *engine.Attempt, st *engine.State) judge.Claim {
	c := s.terms(a.Item, st)
	var claimed bool
	c.Tampered, claimed = s.restoreWorktree(ctx, a.Dir, a.Item.ID)
	c.Claimed = claimed
	c.Own = s.StoryBranch(a.Item.ID)
	c.Body = a.Learnings
	c.Unclaimed = s.unclaimed(a)
	s.wmu.Lock()
	c.Onto = s.merging[a.Item.ID]
	c.Merging = c.Onto != ""
	s.wmu.Unlock()
	// Conflict markers can only be left where a merge was replayed.
	if c.Merging {
		if left := conflictMarkers(ctx, s.Git.At(a.Dir)); len(left) > 0 {
			c.Refused = &engine.Verdict{Claimed: true, Summary: "conflict markers remain in " + strings.Join(left, ", "),
				Failure: "These files still hold conflict markers (<<<<<<< … >>>>>>>): " + strings.Join(left, ", ") + ". Resolve them."}
		}
	}
	return c
}

// Terms are a story's, on its own branch.
func (s *ParallelPRD) Terms(it *engine.Item, st *engine.State) judge.Claim {
	c := s.terms(it, st)
	c.Own = s.StoryBranch(it.ID)
	return c
}

// followMain brings the main tree, checked out on the feature branch,
// along once a story landed there: only the files that differ are
// written (the lander runs it before anything else lands).
func (s *ParallelPRD) followMain(ctx context.Context, v engine.Verdict, old, landed string) error {
	if v.Snapshot != nil {
		v.Snapshot.Remove() // the story's own index stays its worktree's
	}
	return s.Git.SwitchTree(ctx, old, landed)
}

// Landed records a story that landed: the model marks it passed (the
// main tree's PRD already holds it, from the commit), and its worktree is
// tidied: switching a checkout rewrites only the files that differ,
// where a fresh worktree writes every file, so the tree is cleaned,
// parked, and a parked tree is readied for the story likely to start
// next (readyNext). The story's branch is deleted with the others when
// the run stops.
func (s *ParallelPRD) Landed(ctx context.Context, a *engine.Attempt, v engine.Verdict, commit string, st *engine.State) error {
	id := a.Item.ID
	s.markModel(id)
	s.wmu.Lock()
	if commit != "" {
		s.tip = commit
	}
	delete(s.bases, id)
	delete(s.branchPRD, id)
	delete(s.merging, id)
	s.merged = append(s.merged, s.StoryBranch(id))
	s.wmu.Unlock()
	wt := s.Git.At(a.Dir)
	_ = wt.ResetMerge(ctx)
	if err := wt.CleanUntracked(ctx); err != nil {
		s.removeWorktree(ctx, a.Dir)
		_ = s.trees.move(id, treeNone, treeRunning)
		return nil
	}
	if s.trees.move(id, treeParked, treeRunning) == nil {
		s.readyNext(ctx)
	}
	return nil
}

// reuseWorktree moves an idle tree to dir (story id's path, which the
// caller holds, cutting) and puts it on the story's branch at start: the
// tree of story idle (taken already) if given, else a parked one, else one
// readied for a story that has not started (that story's branch, which
// holds only its old base, is marked dropped: cut anew when it starts,
// deleted at the end if it never does). On failure the idle tree is
// removed and false is returned (the caller adds a fresh one: a whole
// checkout, several times the cost of a move and a switch).
func (s *ParallelPRD) reuseWorktree(ctx context.Context, dir, id, start, idle string) bool {
	if idle == "" {
		var dropped bool
		if idle, dropped = s.trees.takeIdle(false); idle == "" {
			return false
		}
		if dropped {
			s.markDropped(idle)
		}
	}
	from := s.WorktreeDir(idle)
	if _, err := os.Lstat(dir); err == nil {
		// Something is at the story's path although its tree is ours to
		// cut: never move a tree into it (git would move it inside).
		_ = s.trees.move(idle, treeParked, treeTaken)
		return false
	}
	if err := s.ListingWorktrees(func() error { return s.Git.WorktreeMove(ctx, from, dir) }); err != nil {
		s.removeWorktree(ctx, from)
		_ = s.trees.move(idle, treeNone, treeTaken)
		return false
	}
	if s.pause != nil {
		s.pause("reuseWorktree: moved")
	}
	// The tree is idle's story's until it leaves that story's branch: were
	// idle's tree released first, that story could start meanwhile and
	// fail to add a tree on its branch ("already checked out" here).
	err := s.switchWorktree(ctx, dir, id, start)
	if err != nil {
		s.removeWorktree(ctx, dir)
	}
	_ = s.trees.move(idle, treeNone, treeTaken) // it is id's, cutting, now
	return err == nil
}

// Conflict merges the feature branch's tip into the story's worktree so
// the conflict is there for a resolver, and describes it. The story's
// base becomes that tip: the resolver's work is counted from it.
func (s *ParallelPRD) Conflict(ctx context.Context, it *engine.Item, paths []string) (string, error) {
	id := it.ID
	wt := s.Git.At(s.WorktreeDir(id))
	tip, err := s.Git.RevParse(ctx, "refs/heads/"+s.Branch)
	if err != nil {
		return "", err
	}
	s.wmu.Lock()
	if s.merging == nil {
		s.merging = map[string]string{}
	}
	s.merging[id] = tip
	s.wmu.Unlock()
	// The story's work becomes a commit on its branch first: git merges
	// onto commits, and the conflict then shows both sides.
	if _, _, err := commitWork(ctx, wt, "", nil, commitMessage(fmt.Sprintf("wip(%s): %s", id, it.Title), nil, "", "Ralph-Story-Branch: "+id), true); err != nil {
		return "", err
	}
	if err := wt.MergeNoCommit(ctx, tip); err == nil {
		// Git merged it cleanly into the story branch after all: commit and
		// let the resolver (or a plain retry) verify.
		_, _ = wt.Commit(ctx, fmt.Sprintf("merge %s into %s\n", s.Branch, s.StoryBranch(id)), true)
	}
	if left := conflictMarkers(ctx, wt); len(left) > 0 {
		paths = left
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
	return b.String(), nil
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

// Recover finds whether a story's squash commit landed, and otherwise
// clears a half-done merge from the main tree.
func (s *ParallelPRD) Recover(ctx context.Context, it *engine.Item, st *engine.State) (string, bool, error) {
	if sha := committedIn(ctx, s.Git, s.Branch, storyTrailer, it.ID, st.RunID); sha != "" {
		// The merge queue made this commit: the branch's known tip moves
		// to it (else the next merge would take it for someone else's
		// commit and restore the branch without it).
		s.recovered(ctx, sha)
		s.markModel(it.ID)
		return sha, true, nil
	}
	if err := s.Git.ResetHard(ctx, "HEAD"); err != nil {
		return "", false, err
	}
	s.wmu.Lock()
	s.tip = ""
	s.wmu.Unlock()
	return "", false, s.setPassed(it.ID, false)
}

// Block leaves the story to a person: its branch and worktree stay as they
// are (conflict included); the reason is in the state.
func (s *ParallelPRD) Block(context.Context, *engine.Item, *engine.State, string) error {
	return nil
}

// Close removes the parked worktrees and the merged stories' branches
// when the run ends: only running or blocked stories keep theirs. Which
// branches go is derived from the state (every passed story's branch), not
// only from this process's memory, so a run resumed after a crash deletes
// the branches of stories an earlier process merged too. A handful of git
// calls in all, however many stories merged; a failure is returned.
func (s *ParallelPRD) Close(st *engine.State) error {
	ctx := context.Background()
	s.wmu.Lock()
	ready := s.mainReady
	s.wmu.Unlock()
	if !ready {
		s.mu.Lock()
		s.repairTrees(ctx)
		s.mu.Unlock()
	}
	// Every worker has finished: no tree is cutting or taken. Parked trees
	// go, and so do trees readied for stories that never started, with
	// their branches.
	idle := s.trees.all(treeParked)
	readied := s.trees.all(treeReady)
	var parked []string
	for _, id := range append(idle, readied...) {
		parked = append(parked, s.WorktreeDir(id))
	}
	s.wmu.Lock()
	merged := s.merged
	for _, id := range readied {
		merged = append(merged, s.StoryBranch(id))
	}
	for id := range s.dropped {
		merged = append(merged, s.StoryBranch(id))
	}
	s.merged, s.dropped = nil, nil
	s.wmu.Unlock()
	for id, is := range st.Items {
		if is.Status == engine.ItemPassed {
			merged = append(merged, s.StoryBranch(id))
		}
	}
	var errs []error
	for i, dir := range parked {
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, err)
			continue
		}
		from := treeParked
		if i >= len(idle) {
			from = treeReady
		}
		_ = s.trees.move(append(idle, readied...)[i], treeNone, from)
	}
	err := s.ListingWorktrees(func() error {
		if err := s.Git.WorktreePrune(ctx); err != nil {
			return err
		}
		existing, err := s.Git.ListBranches(ctx, s.storyPrefix())
		if err != nil {
			return err
		}
		// A branch checked out in a worktree belongs to a story still
		// running (or blocked, kept for a person): git would refuse it.
		busy, err := s.Git.WorktreeBranches(ctx)
		if err != nil {
			return err
		}
		want := map[string]bool{}
		for _, b := range merged {
			want[b] = true
		}
		var doomed []string
		for _, b := range existing {
			if want[b] && !busy[b] {
				doomed = append(doomed, b)
			}
		}
		return s.Git.DeleteBranches(ctx, doomed...)
	})
	if werr := s.trees.rewrite(); werr != nil {
		errs = append(errs, fmt.Errorf("recording the worktrees: %w", werr))
	}
	return errors.Join(append(errs, err)...)
}
