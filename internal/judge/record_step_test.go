package judge

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/ralph-loop/ralph/internal/git"
	"github.com/ralph-loop/ralph/internal/land"
	"github.com/ralph-loop/ralph/internal/proc"
)

// A story recorded while a plan was queued ahead of it, whose plan then
// left the queue (it failed), lands in place: its tree holds the
// bookkeeping (the PRD with the story marked passed), not the snapshot
// taken to merge onto the plan ahead, which has none.
func TestRecordInPlaceAfterThePlanAheadWentHoldsTheMarks(t *testing.T) {
	ctx := context.Background()
	repo, dir := testRepo(t)
	write := func(name, text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("prd.txt", "nothing passed\n")
	if err := repo.AddAll(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := repo.Commit(ctx, "init", false); err != nil {
		t.Fatal(err)
	}
	base, err := repo.RevParse(ctx, "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	baseTree, err := repo.TreeOf(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	l, err := land.New(ctx, repo, "main", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	// A plan queued ahead: another story's work.
	aheadTree, err := repo.WithFiles(ctx, baseTree, map[string][]byte{"other.txt": []byte("other\n")})
	if err != nil {
		t.Fatal(err)
	}
	aheadCommit, err := repo.CommitTreeMsg(ctx, aheadTree, []string{base}, "ahead")
	if err != nil {
		t.Fatal(err)
	}
	ahead, err := l.Enqueue(land.Plan{Item: "X", Tree: aheadTree, Base: base, Commit: aheadCommit})
	if err != nil {
		t.Fatal(err)
	}

	write("work.txt", "work\n")
	marks := 0
	c := &Case{Item: "D", Dir: dir, Base: base, Lander: l, Claim: Claim{
		Mark: func(parent func(string) []byte, _ bool) (map[string][]byte, error) {
			marks++
			if marks == 1 {
				// Built on the plan ahead, the story is about to be queued
				// behind it when that plan fails and leaves the queue.
				l.Withdraw(ahead)
			}
			return map[string][]byte{"prd.txt": []byte("D passed\n")}, nil
		}}}
	j := &Judge{Repo: repo}
	f := recordStep{}.Check(ctx, j, c)
	defer c.snap.Remove()
	if f.Fail != nil {
		t.Fatalf("recording failed: %s: %s", f.Fail.Summary, f.Fail.Failure)
	}
	got, err := repo.Blob(ctx, c.tree+":prd.txt")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "D passed\n" {
		t.Errorf("the tree that lands has prd.txt %q, want the story marked passed", got)
	}
	if _, err := repo.Blob(ctx, c.tree+":work.txt"); err != nil {
		t.Errorf("the tree that lands lacks the work: %v", err)
	}
	if c.ticket == nil || c.ticket.Plan().On != nil || c.ticket.Plan().Base != base {
		t.Errorf("the work was not queued on the tip: %+v", c.ticket)
	}
}

// testRepo is a new repository on main, in a folder of its own, with a
// committer's name for git.
func testRepo(t *testing.T) (*git.Repo, string) {
	t.Helper()
	dir := t.TempDir()
	repo, err := git.Init(context.Background(), proc.Exec{}, dir, "main")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("GIT_AUTHOR_NAME", "t")
	t.Setenv("GIT_AUTHOR_EMAIL", "t@example.com")
	t.Setenv("GIT_COMMITTER_NAME", "t")
	t.Setenv("GIT_COMMITTER_EMAIL", "t@example.com")
	return repo, dir
}
