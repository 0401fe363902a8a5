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
  {"id": "C", "title": "c", "priority": 1, "depends_on": ["A"]},
  {"id": "D", "title": "d", "priority": 1, "depends_on": ["A"]}
]}
`

// A merged story's worktree is readied for the story likely to start next
// (off the agent slots); if merges land before that story starts, its
// start brings the tree to the tip with one checkout. When the run stops,
// readied trees of stories that never started and every merged story's
// branch are gone; a running story keeps its tree.
func TestParallelWorktreeReadiedForNextStory(t *testing.T) {
	dir, repo := newRepo(t)
	ctx := context.Background()
	os.WriteFile(filepath.Join(dir, "prd.json"), []byte(fanOut), 0o644)
	repo.AddAll(ctx)
	if _, err := repo.Commit(ctx, "fan-out prd\n", false); err != nil {
		t.Fatal(err)
	}
	repo.BatchMaintenance = true
	src, err := OpenPRD(filepath.Join(dir, "prd.json"), repo, gate.Runner{Proc: proc.Exec{}})
	if err != nil {
		t.Fatal(err)
	}
	src.Parallel = true
	st := &engine.State{RunID: "r1", Items: map[string]*engine.ItemState{}}
	items := map[string]*engine.Item{}
	for _, it := range src.Items() {
		it := it
		items[it.ID] = &it
		st.Items[it.ID] = &engine.ItemState{ID: it.ID}
	}
	// finish works on a story in its worktree and merges it.
	finish := func(id string) string {
		t.Helper()
		wt, err := src.Prepare(ctx, items[id], st)
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(wt, strings.ToLower(id)+".txt"), []byte(id+"\n"), 0o644)
		a := &engine.Attempt{Item: items[id], Dir: wt}
		v := engine.Verdict{Passed: true, Claimed: true, Summary: "ok"}
		if err := src.Stage(ctx, a, v); err != nil {
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
		src.Cleanup(ctx, a)
		return sha
	}
	headOf := func(id string) string {
		h, err := repo.At(src.WorktreeDir(id)).Head(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}

	tipA := finish("A")
	// A's tree went to B (ready since the start, first in file order among
	// stories nobody waits on), cut at the new tip.
	if _, err := os.Stat(src.WorktreeDir("A")); !os.IsNotExist(err) {
		t.Fatalf("A's worktree still there: %v", err)
	}
	if headOf("B") != tipA || src.PreparedBase("B") != tipA {
		t.Fatalf("B readied at %s (base %s), want %s", headOf("B"), src.PreparedBase("B"), tipA)
	}
	tipC := finish("C") // C gets a fresh worktree; its tree then goes to D
	if headOf("D") != tipC {
		t.Fatalf("D readied at %s, want %s", headOf("D"), tipC)
	}
	// B starts after C merged: one checkout brings it to C's tip.
	wt, err := src.Prepare(ctx, items["B"], st)
	if err != nil {
		t.Fatal(err)
	}
	if headOf("B") != tipC || src.PreparedBase("B") != tipC {
		t.Fatalf("B started at %s (base %s), want the tip %s", headOf("B"), src.PreparedBase("B"), tipC)
	}
	if _, err := os.Stat(filepath.Join(wt, "c.txt")); err != nil {
		t.Fatal("B's tree lacks C's work")
	}
	src.Stopped(st)
	if _, err := os.Stat(src.WorktreeDir("D")); !os.IsNotExist(err) {
		t.Fatalf("D's readied worktree survived the stop: %v", err)
	}
	if _, err := os.Stat(src.WorktreeDir("B")); err != nil {
		t.Fatalf("running B lost its worktree: %v", err)
	}
	branches, _ := repo.Run(ctx, "branch", "--list", "ralph/t-stories/*", "--format=%(refname:short)")
	if branches != "ralph/t-stories/b" {
		t.Fatalf("story branches left: %q", branches)
	}
	worktrees, _ := repo.Run(ctx, "worktree", "list", "--porcelain")
	if strings.Count(worktrees, "worktree ") != 2 {
		t.Fatalf("worktrees: %s", worktrees)
	}
}
