package source

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/gate"
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

// A merged story's worktree is readied for the story likely to start next
// (off the agent slots); if merges land before that story starts, its
// start brings the tree to the tip with one checkout. A story without a
// tree takes a readied one before it would check out a fresh one. When the
// run stops, every merged story's branch is gone; running stories keep
// their trees.
func TestParallelWorktreeReadiedForNextStory(t *testing.T) {
	dir, repo := newRepo(t)
	ctx := context.Background()
	os.WriteFile(filepath.Join(dir, "prd.json"), []byte(fanOut), 0o644)
	repo.AddAll(ctx)
	if _, err := repo.Commit(ctx, "fan-out prd\n", false); err != nil {
		t.Fatal(err)
	}
	repo.BatchMaintenance = true
	src, err := OpenParallelPRD(filepath.Join(dir, "prd.json"), repo, gate.Runner{Proc: proc.Exec{}})
	if err != nil {
		t.Fatal(err)
	}
	st := &engine.State{RunID: "r1", Items: map[string]*engine.ItemState{}}
	items := map[string]*engine.Item{}
	for _, it := range src.Items() {
		it := it
		items[it.ID] = &it
		st.Items[it.ID] = &engine.ItemState{ID: it.ID}
	}
	bases := map[string]string{} // as the last Prepare reported them
	prepare := func(id string) string {
		t.Helper()
		ws, err := src.Prepare(ctx, items[id], st)
		if err != nil {
			t.Fatal(err)
		}
		if !ws.Isolated() || ws.Tidy == nil {
			t.Fatalf("%s's workspace is not its own: %+v", id, ws)
		}
		bases[id] = ws.Base
		return ws.Dir
	}
	// finish works on a story in its worktree and merges it.
	finish := func(id string) string {
		t.Helper()
		wt := src.WorktreeDir(id)
		os.WriteFile(filepath.Join(wt, strings.ToLower(id)+".txt"), []byte(id+"\n"), 0o644)
		a := &engine.Attempt{Item: items[id], Dir: wt}
		v := engine.Verdict{Passed: true, Claimed: true, Summary: "ok"}
		if err := src.commitWorktree(ctx, a, v); err != nil {
			t.Fatal(err)
		}
		if strings.Join(a.Files, ",") != strings.ToLower(id)+".txt" {
			t.Fatalf("staged files %v", a.Files)
		}
		sha, err := src.Accept(ctx, a, v, st)
		if err != nil {
			t.Fatal(err)
		}
		if head, _ := repo.Head(ctx); head != sha {
			t.Fatalf("Accept returned %s, HEAD is %s", sha, head)
		}
		st.Items[id].Status = engine.ItemPassed
		src.tidy(ctx, a)
		return sha
	}
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
