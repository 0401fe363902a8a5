package git

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestStageAllNamesWhatStatusWould: with the index as a commit left it,
// the add's own list is every changed path (what `git status` lists after
// it), an iteration that does not pass gets the index back as it was, and
// anything that makes the index unknown turns the shortcut off.
func TestStageAllNamesWhatStatusWould(t *testing.T) {
	ctx := context.Background()
	r, dir := newTestRepo(t)
	write := func(name, body string) {
		t.Helper()
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("keep.txt", "k\n")
	write("gone.txt", "g\n")
	write("edit.txt", "e\n")
	r.AddAll(ctx)
	if _, err := r.Commit(ctx, "base\n", false); err != nil {
		t.Fatal(err)
	}
	write("edit.txt", "changed\n")
	os.Remove(filepath.Join(dir, "gone.txt"))
	write("sub/new.txt", "n\n")
	write("it's odd.txt", "o\n")
	indexBefore, _ := os.ReadFile(filepath.Join(dir, ".git", "index"))

	s, err := r.StageAll(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Complete {
		t.Fatal("after a commit the index holds HEAD's tree, but StageAll did not say its list is complete")
	}
	s.Restore()
	if after, _ := os.ReadFile(filepath.Join(dir, ".git", "index")); string(after) != string(indexBefore) {
		t.Fatal("Restore did not put back the index from before the add")
	}
	status, err := r.StatusPorcelain(ctx)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(status)
	if !slices.Equal(s.Files, status) {
		t.Fatalf("StageAll named %q, git status %q", s.Files, status)
	}
	for _, l := range []string{"index.ralph-before", "index.ralph-staged"} {
		if _, err := os.Stat(filepath.Join(dir, ".git", l)); !os.IsNotExist(err) {
			t.Fatalf("%s left behind: %v", l, err)
		}
	}

	// Restored, the index is still known to be HEAD's: the next add says so.
	s, err = r.StageAll(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Complete || len(s.Files) != len(status) {
		t.Fatalf("after Restore: complete %v, files %q", s.Complete, s.Files)
	}
	s.Drop()

	// The index holds more than HEAD now (the add above was not undone):
	// the list would miss what was staged before, so it is not complete.
	s, err = r.StageAll(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Complete {
		t.Fatal("an index with staged changes counted as HEAD's")
	}
	s.Drop()

	// A status with nothing staged makes the index known again.
	if _, err := r.Run(ctx, "reset", "-q"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.StatusPorcelain(ctx); err != nil {
		t.Fatal(err)
	}
	if !r.indexIsHEAD() {
		t.Fatal("a status showing nothing staged did not mark the index as HEAD's")
	}
	// Excluded paths keep their old entries, so the list is not complete.
	s, err = r.StageAll(ctx, []string{"edit.txt"})
	if err != nil {
		t.Fatal(err)
	}
	if s.Complete {
		t.Fatal("a list with excluded paths counted as complete")
	}
	s.Drop()
	// A commit the shortcut did not see (the agent's own) moves HEAD.
	r.Run(ctx, "reset", "-q")
	r.StatusPorcelain(ctx)
	r.Run(ctx, "commit", "-qam", "agent's own")
	if r.indexIsHEAD() {
		t.Fatal("the index counted as HEAD's after a commit made behind the package's back")
	}
}

// TestStagedTreeSurvivesAnIndexWrite: the tree the gates ran on is the one
// staged before them, even when something (a gate's `git add`, a `git
// status` refreshing the index) wrote the index in between.
func TestStagedTreeSurvivesAnIndexWrite(t *testing.T) {
	ctx := context.Background()
	r, dir := newTestRepo(t)
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("a\n"), 0o644)
	r.AddAll(ctx)
	if _, err := r.Commit(ctx, "base\n", false); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("agent\n"), 0o644)

	s, err := r.StageAll(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	tree, untouched, err := s.Tree(ctx)
	want, werr := (&Repo{Dir: dir, Runner: countingRunner{}}).WriteTree(ctx)
	if err != nil || werr != nil || tree != want || !untouched {
		t.Fatalf("untouched index: tree %s untouched %v err %v, want %s (%v)", tree, untouched, err, want, werr)
	}
	s.Drop()

	s, err = r.StageAll(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	// "A gate" stages a file of its own.
	os.WriteFile(filepath.Join(dir, "gate.out"), []byte("x\n"), 0o644)
	if _, err := r.Run(ctx, "add", "gate.out"); err != nil {
		t.Fatal(err)
	}
	tree, untouched, err = s.Tree(ctx)
	if err != nil || tree != want || untouched {
		t.Fatalf("after a gate wrote the index: tree %s untouched %v err %v, want %s from the staged copy", tree, untouched, err, want)
	}
	s.Restore() // the index moved on: nothing is put back
	out, _ := r.Run(ctx, "diff", "--cached", "--name-only")
	if out != "a.txt\ngate.out" {
		t.Fatalf("Restore undid someone else's index write: staged %q", out)
	}

	// A process that swaps the kept copy for an index of its own choosing
	// while the gates run gets no tree out of it.
	r.Run(ctx, "reset", "-q")
	s, err = r.StageAll(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "gate2.out"), []byte("y\n"), 0o644)
	if _, err := r.Run(ctx, "add", "gate2.out"); err != nil {
		t.Fatal(err)
	}
	crafted := filepath.Join(dir, ".git", "crafted")
	if _, err := r.Run(ctx, "read-tree", "--index-output="+crafted, "HEAD"); err != nil {
		t.Fatal(err)
	}
	os.Rename(crafted, filepath.Join(dir, ".git", "index.ralph-staged"))
	if tree, _, err := s.Tree(ctx); err == nil {
		t.Fatalf("a swapped staged copy gave tree %s", tree)
	}
	s.Drop()
}
