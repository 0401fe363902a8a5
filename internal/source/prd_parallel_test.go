package source

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/gate"
	"github.com/ralph-loop/ralph/internal/git"
	"github.com/ralph-loop/ralph/internal/proc"
)

const fanOut = `{"project": "t", "branch_name": "ralph/t", "user_stories": [
  {"id": "A", "title": "a", "priority": 1},
  {"id": "B", "title": "b", "priority": 1},
  {"id": "C", "title": "c", "priority": 1},
  {"id": "D", "title": "d", "priority": 1, "depends_on": ["A"]},
  {"id": "E", "title": "e", "priority": 1}
]}
`

// A landed story's worktree is readied for the story likely to start next
// (off the agent slots); if landings come before that story starts, its
// start brings the tree to the tip with one checkout. A story without a
// tree takes a readied one before it would check out a fresh one. When the
// run stops, every merged story's branch is gone; running stories keep
// their trees.
func TestParallelWorktreeReadiedForNextStory(t *testing.T) {
	f := newParallelFixture(t, fanOut)
	ctx, src, repo, st, bases := f.ctx, f.src, f.repo, f.st, f.bases
	prepare, finish := f.prepare, f.finish
	headOf := func(id string) string {
		t.Helper()
		h, err := repo.At(src.WorktreeDir(id)).Head(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	gone := func(id string) {
		t.Helper()
		if _, err := os.Stat(src.WorktreeDir(id)); !os.IsNotExist(err) {
			t.Fatalf("%s's worktree is still there: %v", id, err)
		}
	}

	prepare("A")
	prepare("C")
	tipA := finish("A")
	// A's tree went to B: ready since the start, first in file order among
	// the stories nobody waits on and without a tree; cut at the new tip.
	gone("A")
	if headOf("B") != tipA || src.bases["B"] != tipA {
		t.Fatalf("B readied at %s (base %s), want %s", headOf("B"), src.bases["B"], tipA)
	}
	tipC := finish("C") // C's tree goes to D (B has one)
	if headOf("D") != tipC {
		t.Fatalf("D readied at %s, want %s", headOf("D"), tipC)
	}
	// B starts after C merged: one checkout brings it to C's tip.
	wt := prepare("B")
	if headOf("B") != tipC || bases["B"] != tipC {
		t.Fatalf("B started at %s (base %s), want the tip %s", headOf("B"), bases["B"], tipC)
	}
	if _, err := os.Stat(filepath.Join(wt, "c.txt")); err != nil {
		t.Fatal("B's tree lacks C's work")
	}
	// E has no tree and none is parked: it takes the one readied for D
	// rather than checking out a fresh one.
	prepare("E")
	gone("D")
	if headOf("E") != tipC {
		t.Fatalf("E at %s, want %s", headOf("E"), tipC)
	}
	tipE := finish("E") // E's tree is readied for D again
	if headOf("D") != tipE {
		t.Fatalf("D readied at %s, want %s", headOf("D"), tipE)
	}
	// The run stops with B running and D never started: D's readied tree
	// and the merged stories' branches go, B keeps its tree and branch.
	if err := src.Close(st); err != nil {
		t.Fatal(err)
	}
	gone("D")
	if _, err := os.Stat(src.WorktreeDir("B")); err != nil {
		t.Fatalf("running B lost its worktree: %v", err)
	}
	branches, _ := repo.ListBranches(ctx, "ralph/t-stories/")
	if strings.Join(branches, " ") != "ralph/t-stories/b" {
		t.Fatalf("story branches left: %q", branches)
	}
	worktrees := gitOut(t, repo, "worktree", "list", "--porcelain")
	if strings.Count(worktrees, "worktree ") != 2 {
		t.Fatalf("worktrees: %s", worktrees)
	}
}

// parallelFixture is a parallel PRD in a real repository, with helpers
// that do what the engine does: prepare a story's worktree (its contract
// pinned), and finish it (work, the judge, the landing, Landed).
type parallelFixture struct {
	t     *testing.T
	ctx   context.Context
	src   *ParallelPRD
	repo  *git.Repo
	st    *engine.State
	g     *judging
	items map[string]*engine.Item
	bases map[string]string // as the last Prepare reported them
}

func newParallelFixture(t *testing.T, prdJSON string) *parallelFixture {
	dir, repo := newRepo(t)
	ctx := context.Background()
	os.WriteFile(filepath.Join(dir, "prd.json"), []byte(prdJSON), 0o644)
	repo.AddAll(ctx)
	if _, err := repo.Commit(ctx, "prd\n", false); err != nil {
		t.Fatal(err)
	}
	repo.BatchMaintenance = true
	f := &parallelFixture{t: t, ctx: ctx, repo: repo, bases: map[string]string{},
		st: &engine.State{RunID: "r1", Items: map[string]*engine.ItemState{}}, items: map[string]*engine.Item{}}
	f.restart()
	for _, it := range f.src.Items() {
		it := it
		f.items[it.ID] = &it
		f.st.Items[it.ID] = &engine.ItemState{ID: it.ID}
	}
	return f
}

// restart is a new process: the source opened again, a new judge.
func (f *parallelFixture) restart() {
	f.t.Helper()
	file := filepath.Join(f.repo.Dir, "prd.json")
	if f.src != nil {
		file = f.src.File
	}
	src, err := OpenParallelPRD(file, f.repo, gate.Runner{Proc: proc.Exec{}})
	if err != nil {
		f.t.Fatal(err)
	}
	f.src = src
	f.g = newJudging(f.t, f.repo, src, f.st)
}

func (f *parallelFixture) prepare(id string) string {
	f.t.Helper()
	ws := f.g.prepare(f.items[id])
	if !ws.Isolated || ws.Follow == nil {
		f.t.Fatalf("%s's workspace is not its own: %+v", id, ws)
	}
	f.bases[id] = ws.Base
	return ws.Dir
}

// work writes a story's file in its worktree and claims it: its attempt.
func (f *parallelFixture) work(id string) *engine.Attempt {
	wt := f.src.WorktreeDir(id)
	os.WriteFile(filepath.Join(wt, strings.ToLower(id)+".txt"), []byte(id+"\n"), 0o644)
	return &engine.Attempt{Item: f.items[id], Dir: wt, Claimed: true}
}

// finish works on a story in its worktree, and judges and lands it.
func (f *parallelFixture) finish(id string) string {
	t, ctx := f.t, f.ctx
	t.Helper()
	a := f.work(id)
	v, sha := f.g.judge(a)
	if !v.Passed || sha == "" {
		t.Fatalf("%s: %+v", id, v)
	}
	// Its work, and the PRD marked when the story was built on the tip.
	if files := strings.Join(a.Files, ","); files != strings.ToLower(id)+".txt" && files != strings.ToLower(id)+".txt,prd.json" {
		t.Fatalf("%s's files %v", id, a.Files)
	}
	// The main tree is on the feature branch and followed the landing.
	if head, _ := f.repo.Head(ctx); head != sha {
		t.Fatalf("%s landed as %s, the main tree's HEAD is %s", id, sha, head)
	}
	if tip, _ := f.repo.RevParse(ctx, "refs/heads/"+f.src.Branch); tip != sha {
		t.Fatalf("%s landed as %s, the feature branch is at %s", id, sha, tip)
	}
	f.st.Items[id].Status = engine.ItemPassed
	return sha
}

// The interleaving that lost a story's work: a landed story's tidy
// (Landed) lists the stories to ready a tree for, and before it claims
// one, that story starts (in a fresh tree: the parked one is in the
// tidy's hands) and its agent writes work. The old code then moved the
// parked tree into the running story's folder and force-reset its
// branch. The lifecycle refuses the claim: the tidy readies the next
// story instead, and the running story keeps its tree, its branch and
// its work.
func TestParallelWorktreeNeverMovedUnderARunningStory(t *testing.T) {
	f := newParallelFixture(t, fanOut)
	ctx, src := f.ctx, f.src
	f.prepare("A")
	var work string
	paused := false
	src.pause = func(point string) {
		if point != "readyNext: candidates listed" || paused {
			return
		}
		paused = true
		if got := src.trees.state("B"); got != treeNone {
			t.Fatalf("B's tree is %s before it starts", orNone(got))
		}
		// B starts now, first in the tidy's list, and its agent works.
		work = f.prepare("B")
		os.WriteFile(filepath.Join(work, "b-work.txt"), []byte("uncommitted work\n"), 0o644)
	}
	bBase := ""
	tipA := f.finish("A")
	if !paused {
		t.Fatal("the tidy never listed candidates: the interleaving was not forced")
	}
	bBase = f.bases["B"]
	if b, err := os.ReadFile(filepath.Join(work, "b-work.txt")); err != nil || string(b) != "uncommitted work\n" {
		t.Fatalf("B's work is gone: %q, %v", b, err)
	}
	if h, _ := f.repo.At(work).Head(ctx); h != bBase {
		t.Fatalf("B's tree moved from its base %s to %s", bBase, h)
	}
	if br := gitOut(t, f.repo.At(work), "symbolic-ref", "--short", "HEAD"); strings.TrimSpace(br) != src.StoryBranch("B") {
		t.Fatalf("B's tree is on %q", br)
	}
	if entries, _ := os.ReadDir(work); len(entries) == 0 || hasDir(entries, src.slug("A")) {
		t.Fatalf("a tree was moved inside B's: %v", entries)
	}
	if src.trees.state("B") != treeRunning {
		t.Fatalf("B's tree is %s", orNone(src.trees.state("B")))
	}
	// A's tree was readied for the next candidate, C, at A's merge.
	if src.trees.state("C") != treeReady {
		t.Fatalf("C's tree is %s, want ready", orNone(src.trees.state("C")))
	}
	if h, _ := f.repo.At(src.WorktreeDir("C")).Head(ctx); h != tipA {
		t.Fatalf("C readied at %s, want %s", h, tipA)
	}
}

func hasDir(entries []os.DirEntry, name string) bool {
	for _, e := range entries {
		if e.Name() == name {
			return true
		}
	}
	return false
}

// A rerun after a crash rebuilds the lifecycle from worktrees.jsonl and
// the disk: a tree left half-cut is removed (its story starts in a fresh
// one), a tree readied ahead is kept for its story, a merged story's tree
// is parked for reuse, and a running story's tree keeps its work.
func TestParallelWorktreesRepairedOnResume(t *testing.T) {
	f := newParallelFixture(t, fanOut)
	ctx := f.ctx
	f.prepare("A")
	f.prepare("C")
	f.finish("A") // A's tree readied for B
	os.WriteFile(filepath.Join(f.src.WorktreeDir("C"), "c-work.txt"), []byte("C\n"), 0o644)
	// The crash: E's tree was being cut (git died half-way: a folder with
	// a .git file and nothing else).
	eDir := f.src.WorktreeDir("E")
	os.MkdirAll(eDir, 0o755)
	os.WriteFile(filepath.Join(eDir, ".git"), []byte("gitdir: /nowhere\n"), 0o644)
	if err := f.src.trees.move("E", treeCutting, treeNone); err != nil {
		t.Fatal(err)
	}
	if f.src.trees.state("B") != treeReady {
		t.Fatalf("B's tree is %s before the crash", orNone(f.src.trees.state("B")))
	}
	// A new process.
	f.restart()
	src := f.src
	if dir := f.prepare("C"); !fileHas(t, filepath.Join(dir, "c-work.txt"), "C\n") {
		t.Fatal("C's work was not reattached")
	}
	for id, want := range map[string]treeState{"B": treeReady, "C": treeRunning, "E": treeNone} {
		if got := src.trees.state(id); got != want {
			t.Errorf("after resume %s's tree is %s, want %s", id, orNone(got), orNone(want))
		}
	}
	if _, err := os.Stat(eDir); !os.IsNotExist(err) {
		t.Fatalf("E's half-made tree is still there: %v", err)
	}
	// E takes the tree readied for B before the crash; B is cut anew.
	f.prepare("E")
	if h, err := f.repo.At(eDir).Head(ctx); err != nil || h == "" {
		t.Fatalf("E's new tree: %v", err)
	}
	f.prepare("B")
	log, _ := os.ReadFile(src.trees.log)
	for _, want := range []string{`"story":"B","from":"ready","to":"taken"`, `"story":"B","from":"cutting","to":"running"`} {
		if !strings.Contains(string(log), want) {
			t.Fatalf("the lifecycle log lacks %s:\n%s", want, log)
		}
	}
}

func fileHas(t *testing.T, path, want string) bool {
	t.Helper()
	b, err := os.ReadFile(path)
	return err == nil && string(b) == want
}

// A crash right after a story landed, before the state recorded it: the
// rerun recovers the commit, and the branch's lander takes it as its tip
// — the next landing must not call it someone else's commit and restore
// the branch without it (which lost the story's work).
func TestParallelRecoveredCommitIsTheQueueTip(t *testing.T) {
	f := newParallelFixture(t, fanOut)
	ctx := f.ctx
	f.prepare("A")
	f.finish("A")
	f.prepare("C")
	// C lands, and the process dies before anything is told of it.
	f.g.quiet = true
	_, shaC := f.g.judge(f.work("C"))
	if shaC == "" {
		t.Fatal("C did not land")
	}
	// The crash: the state knows A passed, not C.
	f.st.Items["A"].PassedAt = &time.Time{}
	f.st.Items["A"].Commit, _ = f.repo.RevParse(ctx, shaC+"~1")
	f.restart()
	if err := f.src.Sync(f.st, engine.SyncResume); err != nil {
		t.Fatal(err)
	}
	sha, ok, err := f.src.Recover(ctx, f.items["C"], f.st)
	if err != nil || !ok || sha != shaC {
		t.Fatalf("Recover: %s %v %v, want %s", sha, ok, err, shaC)
	}
	f.st.Items["C"].Status = engine.ItemPassed
	f.prepare("B")
	f.finish("B") // fails the test if the landing is refused
	if !f.repo.IsAncestor(ctx, shaC, "ralph/t") {
		t.Fatal("C's commit is no longer on the feature branch")
	}
}

// A rerun that starts no story — the crashed process had merged them all,
// or left only a commit to recover — still removes the trees and branches
// that process left: Close learns them from worktrees.jsonl and the disk
// first (found by make torture: a rerun that only recovered a commit left
// three story branches and their worktrees behind, and recorded none).
func TestParallelCloseWithoutAStartCleansUp(t *testing.T) {
	f := newParallelFixture(t, fanOut)
	ctx := f.ctx
	f.prepare("A")
	f.finish("A") // A's tree readied for B
	f.prepare("C")
	f.finish("C")
	// A new process that starts nothing.
	f.restart()
	src := f.src
	if err := src.Close(f.st); err != nil {
		t.Fatal(err)
	}
	if wts, _ := f.repo.Run(ctx, "worktree", "list", "--porcelain"); strings.Count(wts, "worktree ") != 1 {
		t.Fatalf("worktrees left:\n%s", wts)
	}
	if bs, _ := f.repo.ListBranches(ctx, src.storyPrefix()); len(bs) != 0 {
		t.Fatalf("story branches left: %v", bs)
	}
	if log, _ := os.ReadFile(src.trees.log); len(log) != 0 {
		t.Fatalf("worktrees.jsonl still records trees:\n%s", log)
	}
}

// A merged story run again (a power cut lost its merge after the state
// recorded it, so the state is believed no more): its tree was passed on,
// its branch is still there, and the new tree attaches that branch as it
// is. The tree's base must still be the feature branch's tip — with the
// branch's own head as base, the merge queue took the story's old work
// commit for one the feature branch had lost and reset the branch to it.
func TestParallelStoryRunAgainKeepsAFeatureBase(t *testing.T) {
	f := newParallelFixture(t, fanOut)
	ctx := f.ctx
	f.prepare("A")
	tipA := f.finish("A") // A's tree readied for B; A's branch stays
	before, err := f.repo.RevParse(ctx, tipA+"~1")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.repo.ResetHard(ctx, before); err != nil { // the merge is lost
		t.Fatal(err)
	}
	f.st.Items["A"].Status = engine.ItemPending
	// No tree to pass on (B's, cut at the lost merge, went too): A's
	// starts with a fresh add.
	if err := f.repo.WorktreeRemove(ctx, f.src.WorktreeDir("B")); err != nil {
		t.Fatal(err)
	}
	f.restart()
	f.prepare("A")
	if f.bases["A"] != before {
		t.Fatalf("A's base is %s, want the feature tip %s", f.bases["A"], before)
	}
	f.finish("A") // fails the test if the landing is refused
	if log := gitOut(t, f.repo, "log", "--format=%s", "ralph/t"); strings.Contains(log, "wip(") {
		t.Fatalf("a story branch's commit reached the feature branch:\n%s", log)
	}
}

// A tree readied for one story and taken by another is still on the
// first story's branch until it is switched: the first story, starting
// meanwhile, waits for the switch (its tree is taken), then cuts its own
// tree on its branch. Releasing the taken tree before the switch let it
// start at once and fail: "… is already checked out at …/worktrees/e".
func TestParallelTakenTreeHeldUntilItLeavesTheBranch(t *testing.T) {
	f := newParallelFixture(t, fanOut)
	f.prepare("A")
	f.finish("A") // A's tree is readied for B
	if got := f.src.trees.state("B"); got != treeReady {
		t.Fatalf("B's tree is %s, want ready", orNone(got))
	}
	started := make(chan error, 1)
	paused := false
	f.src.pause = func(point string) {
		if point != "reuseWorktree: moved" || paused {
			return
		}
		paused = true
		if got := f.src.trees.state("B"); got != treeTaken {
			t.Errorf("B's tree, moved to E's path but still on B's branch, is %s, want taken", orNone(got))
		}
		go func() {
			_, err := f.src.Prepare(f.ctx, f.items["B"], f.st)
			started <- err
		}()
		// B's start gets the chance to run ahead of the switch.
		select {
		case err := <-started:
			started <- err
		case <-time.After(300 * time.Millisecond):
		}
	}
	f.prepare("E") // takes B's readied tree
	if !paused {
		t.Fatal("E did not take B's tree: the interleaving was not forced")
	}
	if err := <-started; err != nil {
		t.Fatalf("B's start: %v", err)
	}
	for _, id := range []string{"B", "E"} {
		br := gitOut(t, f.repo.At(f.src.WorktreeDir(id)), "symbolic-ref", "--short", "HEAD")
		if strings.TrimSpace(br) != f.src.StoryBranch(id) {
			t.Errorf("%s's tree is on %q", id, br)
		}
	}
}
