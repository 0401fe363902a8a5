package git

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/ralph-loop/ralph/internal/proc"
)

// TestReadWhereMatchesGit checks the files-only answer against git's own
// in each layout it reads, and that it steps aside where it does not.
func TestReadWhereMatchesGit(t *testing.T) {
	ctx := context.Background()
	r, dir := newTestRepo(t)
	slow := &Repo{Dir: dir, Runner: countingRunner{}} // not proc.Exec: always asks git
	same := func(what string, repo *Repo) {
		t.Helper()
		b, h, ok := repo.readWhere()
		if !ok {
			t.Fatalf("%s: readWhere declined a plain layout", what)
		}
		wb, wh, err := (&Repo{Dir: repo.Dir, Runner: countingRunner{}}).Where(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if b != wb || h != wh {
			t.Fatalf("%s: readWhere = %q %q, git says %q %q", what, b, h, wb, wh)
		}
	}
	if _, _, ok := slow.readWhere(); ok {
		t.Fatal("readWhere answered for a runner that is not the real one")
	}
	same("unborn branch", r)
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("a\n"), 0o644)
	r.AddAll(ctx)
	if _, err := r.Commit(ctx, "one\n", false); err != nil {
		t.Fatal(err)
	}
	same("loose ref", r)
	r.Run(ctx, "pack-refs", "--all")
	if _, err := os.Stat(filepath.Join(dir, ".git", "refs", "heads", "main")); !os.IsNotExist(err) {
		t.Fatalf("pack-refs left the loose ref: %v", err)
	}
	same("packed ref", r)
	r.Run(ctx, "checkout", "-q", "-b", "other")
	same("new branch on a packed commit", r)
	wt := filepath.Join(t.TempDir(), "wt")
	if _, err := r.Run(ctx, "worktree", "add", "-q", "-b", "wt-branch", wt); err != nil {
		t.Fatal(err)
	}
	same("linked worktree", r.At(wt))
	r.Run(ctx, "checkout", "-q", "--detach")
	same("detached HEAD", r)
	t.Setenv("GIT_DIR", filepath.Join(dir, ".git"))
	if _, _, ok := r.readWhere(); ok {
		t.Fatal("readWhere answered with GIT_DIR set")
	}
}

func TestIndexStamp(t *testing.T) {
	ctx := context.Background()
	r, dir := newTestRepo(t)
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("a\n"), 0o644)
	r.AddAll(ctx)
	s1 := r.IndexStamp()
	if s1 == "" || r.IndexStamp() != s1 {
		t.Fatalf("stamp %q is not stable", s1)
	}
	os.WriteFile(filepath.Join(dir, "b.txt"), []byte("b\n"), 0o644)
	if r.IndexStamp() != s1 {
		t.Fatal("a tree write changed the index stamp")
	}
	r.AddAll(ctx)
	if r.IndexStamp() == s1 {
		t.Fatal("git add did not change the index stamp")
	}
	if (&Repo{Dir: dir, Runner: countingRunner{}}).IndexStamp() != "" {
		t.Fatal("a stamp without the real runner")
	}
}

// countingRunner is the real runner under another type, which the
// files-only readers do not trust.
type countingRunner struct{}

func (countingRunner) Run(ctx context.Context, c proc.Cmd) (proc.Result, error) {
	return proc.Exec{}.Run(ctx, c)
}
