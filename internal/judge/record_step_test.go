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
	repo, dir, base, l := recordRepo(t)
	// A plan queued ahead: another story's work.
	ahead := enqueueOther(t, repo, l, base)

	if err := os.WriteFile(filepath.Join(dir, "work.txt"), []byte("work\n"), 0o644); err != nil {
		t.Fatal(err)
	}
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
	record(t, j, c)
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

// A story with no work, recorded in place (its mark in the snapshot),
// whose place at the end of the queue another plan took before it was
// queued, is built again on that plan from a snapshot without its mark:
// what the work changed is read again, so its own mark is never taken
// for work, and the claim has none.
func TestRecordRebuiltBehindAPlanCountsNoMarkAsWork(t *testing.T) {
	ctx := context.Background()
	repo, dir, base, l := recordRepo(t)
	var ahead *land.Ticket
	c := &Case{Item: "D", Dir: dir, Base: base, Lander: l, Claim: Claim{
		Mark: func(parent func(string) []byte, _ bool) (map[string][]byte, error) {
			if ahead == nil {
				ahead = enqueueOther(t, repo, l, base)
			}
			return map[string][]byte{"prd.txt": []byte("D passed\n")}, nil
		}}}
	j := &Judge{Repo: repo}
	record(t, j, c)
	if c.ticket == nil || c.ticket.Plan().On != ahead {
		t.Fatalf("the work was not queued behind the plan ahead: %+v", c.ticket)
	}
	if len(c.changes) != 0 {
		t.Errorf("the work changed %+v; want nothing (the agent did nothing)", c.changes)
	}
	if f := (realWorkCheck{}).Check(ctx, j, c); f.Fail == nil || f.Fail.Summary != "no change: the claim comes with no work" {
		t.Errorf("real work: %+v, want no change", f.Fail)
	}
}

// record runs the record step on c; the test fails when it does.
func record(t *testing.T, j *Judge, c *Case) {
	t.Helper()
	f := recordStep{}.Check(context.Background(), j, c)
	t.Cleanup(func() { c.snap.Remove() })
	if f.Fail != nil {
		t.Fatalf("recording failed: %s: %s", f.Fail.Summary, f.Fail.Failure)
	}
}

// recordRepo is a repository whose one commit (the base) holds prd.txt,
// the bookkeeping, and the lander of its main.
func recordRepo(t *testing.T) (*git.Repo, string, string, *land.Lander) {
	t.Helper()
	ctx := context.Background()
	repo, dir := testRepo(t)
	if err := os.WriteFile(filepath.Join(dir, "prd.txt"), []byte("nothing passed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
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
	l, err := land.New(ctx, repo, "main", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	return repo, dir, base, l
}

// enqueueOther queues another story's work (other.txt) on base.
func enqueueOther(t *testing.T, repo *git.Repo, l *land.Lander, base string) *land.Ticket {
	t.Helper()
	ctx := context.Background()
	baseTree, err := repo.TreeOf(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	tree, err := repo.WithFiles(ctx, baseTree, map[string][]byte{"other.txt": []byte("other\n")})
	if err != nil {
		t.Fatal(err)
	}
	commit, err := repo.CommitTreeMsg(ctx, tree, []string{base}, "ahead")
	if err != nil {
		t.Fatal(err)
	}
	tk, err := l.Enqueue(land.Plan{Item: "X", Tree: tree, Base: base, Commit: commit})
	if err != nil {
		t.Fatal(err)
	}
	return tk
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
