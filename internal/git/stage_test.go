package git

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestStageAllAndRestore: the staged tree is what a commit of the whole
// tree would hold, and an iteration that does not pass gets the index
// back as the agent left it (partly staged), not everything staged.
func TestStageAllAndRestore(t *testing.T) {
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
	write("staged.txt", "s\n")
	if err := r.AddPaths(ctx, "staged.txt"); err != nil {
		t.Fatal(err)
	}
	write("staged.txt", "s, then more\n")
	statusBefore, _ := r.Run(ctx, "status", "--porcelain")

	s, err := r.StageAll(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := r.WriteTree(ctx); s.Tree != want {
		t.Fatalf("staged tree %s, the index holds %s", s.Tree, want)
	}
	if got, _ := r.Run(ctx, "ls-tree", "-r", "--name-only", s.Tree); got != "edit.txt\nkeep.txt\nstaged.txt\nsub/new.txt" {
		t.Fatalf("staged tree lists %q", got)
	}
	if err := s.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	if after, _ := r.Run(ctx, "status", "--porcelain"); after != statusBefore {
		t.Fatalf("Restore left the status\n%s\nwant\n%s", after, statusBefore)
	}

	// Excluded paths are not staged.
	s, err = r.StageAll(ctx, []string{"edit.txt"})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := r.Run(ctx, "diff", "--cached", "--name-only"); got != "gone.txt\nstaged.txt\nsub/new.txt" {
		t.Fatalf("staged with edit.txt excluded: %q", got)
	}
	if err := s.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	if after, _ := r.Run(ctx, "status", "--porcelain"); after != statusBefore {
		t.Fatalf("Restore left the status\n%s\nwant\n%s", after, statusBefore)
	}
}

// TestStagedTreeSurvivesAnIndexWrite: the tree the gates ran on is the one
// staged before them, even when something (a gate's `git add`) wrote the
// index in between; Restore then leaves that write alone.
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
	want := s.Tree
	// "A gate" stages a file of its own.
	os.WriteFile(filepath.Join(dir, "gate.out"), []byte("x\n"), 0o644)
	if _, err := r.Run(ctx, "add", "gate.out"); err != nil {
		t.Fatal(err)
	}
	if now, _ := r.WriteTree(ctx); now == want || s.Tree != want {
		t.Fatalf("staged tree %s, index %s, want %s kept apart", s.Tree, now, want)
	}
	if err := s.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	if out, _ := r.Run(ctx, "diff", "--cached", "--name-only"); out != "a.txt\ngate.out" {
		t.Fatalf("Restore undid someone else's index write: staged %q", out)
	}
}

// TestStageAllResolvesAConflict: an index with unmerged paths has no tree
// to put back; StageAll stages the agent's resolution all the same.
func TestStageAllResolvesAConflict(t *testing.T) {
	ctx := context.Background()
	r, dir := newTestRepo(t)
	f := filepath.Join(dir, "a.txt")
	os.WriteFile(f, []byte("base\n"), 0o644)
	r.AddAll(ctx)
	if _, err := r.Commit(ctx, "base\n", false); err != nil {
		t.Fatal(err)
	}
	if err := r.CreateBranch(ctx, "other", ""); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(f, []byte("main\n"), 0o644)
	r.Run(ctx, "commit", "-qam", "main")
	r.Checkout(ctx, "other")
	os.WriteFile(f, []byte("other\n"), 0o644)
	r.Run(ctx, "commit", "-qam", "other")
	if _, err := r.Run(ctx, "merge", "main"); err == nil {
		t.Fatal("the merge did not conflict")
	}
	os.WriteFile(f, []byte("resolved\n"), 0o644)

	s, err := r.StageAll(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	if paths, _ := r.UnmergedPaths(ctx); len(paths) != 0 {
		t.Fatalf("unmerged after StageAll: %q", paths)
	}
	if blob, _ := r.Run(ctx, "show", s.Tree+":a.txt"); blob != "resolved" {
		t.Fatalf("staged a.txt = %q", blob)
	}
}
