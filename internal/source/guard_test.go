package source

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// A story's commit found after a crash never moves the guard's tip back
// past a merge made since the resume (found by make torture: a parallel
// run recovered H after it had merged A on top of H, took A for a commit
// made outside the merge queue and restored the branch without it, again
// and again, until the breaker opened).
func TestRecoveredCommitNeverMovesTheTipBack(t *testing.T) {
	dir, repo := newRepo(t)
	ctx := context.Background()
	commit := func(name string) string {
		t.Helper()
		os.WriteFile(filepath.Join(dir, name), []byte(name+"\n"), 0o644)
		if err := repo.AddAll(ctx); err != nil {
			t.Fatal(err)
		}
		sha, err := repo.Commit(ctx, "feat("+name+")\n", false)
		if err != nil {
			t.Fatal(err)
		}
		return sha
	}
	h := commit("H")
	a := commit("A")
	var g branchGuard
	g.recordTip(a) // A merged after the resume
	g.recordRecovered(ctx, repo, h)
	if g.tip != a {
		t.Fatalf("recovering H (under A) moved the tip to %s, want A %s", g.tip, a)
	}
	b := commit("B")
	g.recordRecovered(ctx, repo, b)
	if g.tip != b {
		t.Fatalf("recovering B (on top of A) left the tip at %s, want B %s", g.tip, b)
	}
	var fresh branchGuard
	fresh.recordRecovered(ctx, repo, h)
	if fresh.tip != h {
		t.Fatalf("a guard with no tip did not take the recovered commit: %q", fresh.tip)
	}
}
