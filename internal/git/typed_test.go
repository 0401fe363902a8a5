package git

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ralph-loop/ralph/internal/proc"
)

// Paths and names from data stay single argv words; pathspecs are literal.
func TestTypedArgv(t *testing.T) {
	g := func(args ...string) []string { return append([]string{"git", "-C", "/r"}, args...) }
	const tree = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
	mergeTree := g("merge-tree", "--write-tree", "--name-only", "--no-messages", "a", "b")
	f := proc.NewFakeRunner(t,
		proc.Expectation{Argv: g("checkout", "--quiet", "--force", "-B", "ralph/x-stories/a b", "abc")},
		proc.Expectation{Argv: g("checkout", "HEAD", "--", ":(literal)*.json")},
		proc.Expectation{Argv: g("reset", "-q", "HEAD", "--", ":(literal)tasks.jsonl")},
		proc.Expectation{Argv: g("rev-list", "--count", "main..HEAD", "--"), Stdout: "3\n"},
		proc.Expectation{Argv: g("branch", "-D", "--", "a", "b")},
		proc.Expectation{Argv: g("for-each-ref", "--format=%(refname:short)", "refs/heads/ralph/"), Stdout: "ralph/a\nralph/b\n"},
		proc.Expectation{Argv: g("diff", "--cached", "--quiet"), Exit: 1},
		proc.Expectation{Argv: g("diff", "--cached", "--quiet")},
		proc.Expectation{Argv: g("cat-file", "-e", "HEAD:dir/a b.txt")},
		proc.Expectation{Argv: g("cat-file", "-e", "HEAD:gone"), Exit: 1},
		proc.Expectation{Argv: g("diff", "--name-only", "--diff-filter=U"), Stdout: "a.txt\nb c.txt\n"},
		proc.Expectation{Argv: g("clean", "-fdxq")},
		proc.Expectation{Argv: g("merge", "--no-ff", "--no-commit", "ralph/x")},
		proc.Expectation{Argv: g("check-ignore", "-z", "--stdin"), Stdout: ".ralph/state.json\x00", Check: func(c proc.Cmd) {
			if b, _ := io.ReadAll(c.Stdin); string(b) != ".ralph/state.json\x00main.go\x00a b\nc\x00" {
				t.Errorf("check-ignore stdin %q", b)
			}
		}},
		proc.Expectation{Argv: g("check-ignore", "-z", "--stdin"), Exit: 1},
		proc.Expectation{Argv: mergeTree, Stdout: tree + "\n"},
		proc.Expectation{Argv: mergeTree, Stdout: tree + "\na.txt\nb c.txt\n", Exit: 1},
		proc.Expectation{Argv: mergeTree, Stderr: "merge-tree: b - not something we can merge", Exit: 1},
		proc.Expectation{Argv: mergeTree, Stderr: "fatal: refusing to merge unrelated histories", Exit: 128},
	)
	r := &Repo{Dir: "/r", Runner: f}
	ctx := context.Background()
	if err := r.ForceCheckoutBranch(ctx, "ralph/x-stories/a b", "abc"); err != nil {
		t.Fatal(err)
	}
	if err := r.RestorePath(ctx, "HEAD", "*.json"); err != nil {
		t.Fatal(err)
	}
	if err := r.Unstage(ctx, "tasks.jsonl"); err != nil {
		t.Fatal(err)
	}
	if n, err := r.CountCommits(ctx, "main..HEAD"); n != 3 || err != nil {
		t.Fatal(n, err)
	}
	// A repeated name would make git refuse the whole call.
	if err := r.DeleteBranches(ctx, "a", "b", "a", ""); err != nil {
		t.Fatal(err)
	}
	if err := r.DeleteBranches(ctx); err != nil { // nothing to delete: no git call
		t.Fatal(err)
	}
	if got, err := r.ListBranches(ctx, "ralph/"); strings.Join(got, " ") != "ralph/a ralph/b" || err != nil {
		t.Fatal(got, err)
	}
	if !r.HasStagedChanges(ctx) || r.HasStagedChanges(ctx) {
		t.Fatal("HasStagedChanges misread git's exit code")
	}
	if !r.HasPath(ctx, "HEAD", "dir/a b.txt") || r.HasPath(ctx, "HEAD", "gone") {
		t.Fatal("HasPath misread git's exit code")
	}
	if got, err := r.UnmergedPaths(ctx); strings.Join(got, "|") != "a.txt|b c.txt" || err != nil {
		t.Fatal(got, err)
	}
	if err := r.CleanUntracked(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.MergeNoCommit(ctx, "ralph/x"); err != nil {
		t.Fatal(err)
	}
	if ign, err := r.Ignored(ctx, ".ralph/state.json", "main.go", "a b\nc"); err != nil || len(ign) != 1 || !ign[".ralph/state.json"] {
		t.Fatal("Ignored misread git's answer", ign, err)
	}
	if ign, err := r.Ignored(ctx, "main.go"); err != nil || len(ign) != 0 {
		t.Fatal("Ignored misread git's exit code", ign, err)
	}
	// Clean; conflicted (exit 1, the tree id, then the paths); exit 1 with
	// no tree id and any other exit are failures, not conflicts.
	if paths, err := r.MergeConflicts(ctx, "a", "b"); paths != nil || err != nil {
		t.Fatal(paths, err)
	}
	if paths, err := r.MergeConflicts(ctx, "a", "b"); strings.Join(paths, "|") != "a.txt|b c.txt" || err != nil {
		t.Fatal(paths, err)
	}
	for range 2 {
		if paths, err := r.MergeConflicts(ctx, "a", "b"); paths != nil || err == nil {
			t.Fatal(paths, err)
		}
	}
}

func commitFile(t *testing.T, r *Repo, dir, name, content, msg string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := r.AddAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Commit(context.Background(), msg+"\n", false); err != nil {
		t.Fatal(err)
	}
}

func TestTypedWithRealGit(t *testing.T) {
	ctx := context.Background()
	r, dir := newTestRepo(t)
	commitFile(t, r, dir, "f.txt", "base\n", "init")
	if err := r.CreateBranch(ctx, "side", ""); err != nil {
		t.Fatal(err)
	}
	if err := r.CreateBranch(ctx, "clean", ""); err != nil {
		t.Fatal(err)
	}
	commitFile(t, r, dir, "f.txt", "main\n", "main change")
	r.Checkout(ctx, "side")
	commitFile(t, r, dir, "f.txt", "side\n", "side change")
	r.Checkout(ctx, "clean")
	commitFile(t, r, dir, "g.txt", "g\n", "other file")
	r.Checkout(ctx, "main")

	if paths, err := r.MergeConflicts(ctx, "main", "side"); err != nil || strings.Join(paths, ",") != "f.txt" {
		t.Fatalf("MergeConflicts(side) = %v, %v", paths, err)
	}
	if paths, err := r.MergeConflicts(ctx, "main", "clean"); err != nil || paths != nil {
		t.Fatalf("MergeConflicts(clean) = %v, %v", paths, err)
	}
	if _, err := r.MergeConflicts(ctx, "main", "no-such-branch"); err == nil {
		t.Fatal("MergeConflicts with an unknown branch gave no error")
	}
	if _, err := r.Run(ctx, "checkout", "--quiet", "--orphan", "unrelated"); err != nil {
		t.Fatal(err)
	}
	commitFile(t, r, dir, "u.txt", "u\n", "unrelated root")
	r.Checkout(ctx, "main")
	if paths, err := r.MergeConflicts(ctx, "main", "unrelated"); err == nil {
		t.Fatalf("MergeConflicts with unrelated histories = %v, no error", paths)
	}
	if n, err := r.CountCommits(ctx, "clean..main"); n != 1 || err != nil {
		t.Fatalf("CountCommits = %d, %v", n, err)
	}

	// A conflicted merge: the paths, then a restore from HEAD.
	if err := r.MergeNoCommit(ctx, "side"); err == nil {
		t.Fatal("the merge should conflict")
	}
	if paths, err := r.UnmergedPaths(ctx); err != nil || strings.Join(paths, ",") != "f.txt" {
		t.Fatalf("UnmergedPaths = %v, %v", paths, err)
	}
	if err := r.ResetHard(ctx, "HEAD"); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "f.txt"), []byte("edited\n"), 0o644)
	if !r.HasPath(ctx, "HEAD", "f.txt") || r.HasPath(ctx, "HEAD", "nope.txt") {
		t.Fatal("HasPath")
	}
	// The path is literal: "*.txt" names no file in HEAD, so nothing is
	// restored (as a glob it would restore f.txt).
	if err := r.RestorePath(ctx, "HEAD", "*.txt"); err == nil {
		t.Fatal("RestorePath of a path HEAD lacks gave no error")
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "f.txt")); string(b) != "edited\n" {
		t.Fatalf("RestorePath(*.txt) restored f.txt: %q", b)
	}
	if err := r.RestorePath(ctx, "HEAD", "f.txt"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "f.txt")); string(b) != "main\n" {
		t.Fatalf("RestorePath left %q", b)
	}

	// Staged changes, then unstaged again.
	os.WriteFile(filepath.Join(dir, "new.txt"), []byte("n\n"), 0o644)
	if r.HasStagedChanges(ctx) {
		t.Fatal("nothing is staged yet")
	}
	r.AddPaths(ctx, "new.txt")
	if !r.HasStagedChanges(ctx) {
		t.Fatal("new.txt is staged")
	}
	if err := r.Unstage(ctx, "new.txt"); err != nil || r.HasStagedChanges(ctx) {
		t.Fatalf("Unstage: %v", err)
	}
	os.MkdirAll(filepath.Join(dir, ".ralph"), 0o755)
	r.EnsureExcluded(ctx, "/.ralph/")
	if ign, _ := r.Ignored(ctx, ".ralph/x", "new.txt"); !ign[".ralph/x"] || ign["new.txt"] {
		t.Fatal("Ignored", ign)
	}
	// IndexMatches reads the index, never the tree; SamePaths compares
	// two revisions; a path in neither matches.
	if !r.IndexMatches(ctx, "HEAD", "new.txt", "absent") {
		t.Fatal("an untracked path is in neither the index nor HEAD")
	}
	r.AddPaths(ctx, "new.txt")
	if r.IndexMatches(ctx, "HEAD", "new.txt") || !r.IndexMatches(ctx, "HEAD", "absent") {
		t.Fatal("IndexMatches after staging")
	}
	head, _ := r.Head(ctx)
	r.Commit(ctx, "new", false)
	os.WriteFile(filepath.Join(dir, "new.txt"), []byte("changed in the tree only\n"), 0o644)
	if !r.IndexMatches(ctx, "HEAD", "new.txt") || r.IndexMatches(ctx, head, "new.txt") {
		t.Fatal("IndexMatches looked at the tree, or missed the commit")
	}
	if r.SamePaths(ctx, head, "HEAD", "new.txt") || !r.SamePaths(ctx, head, "HEAD", "absent") {
		t.Fatal("SamePaths")
	}
	if err := r.ResetHard(ctx, head); err != nil {
		t.Fatal(err)
	}
	if err := r.CleanUntracked(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "new.txt")); !os.IsNotExist(err) {
		t.Fatal("CleanUntracked left new.txt")
	}

	// Branches: listed by prefix, deleted in one call despite a repeat,
	// and a failure is reported, not swallowed.
	r.CreateBranch(ctx, "ralph/a", "")
	r.CreateBranch(ctx, "ralph/b", "")
	if got, _ := r.ListBranches(ctx, "ralph/"); strings.Join(got, " ") != "ralph/a ralph/b" {
		t.Fatalf("ListBranches = %v", got)
	}
	if err := r.DeleteBranches(ctx, "ralph/a", "ralph/b", "ralph/a"); err != nil {
		t.Fatal(err)
	}
	if got, _ := r.ListBranches(ctx, "ralph/"); len(got) != 0 {
		t.Fatalf("left %v", got)
	}
	if err := r.DeleteBranches(ctx, "ralph/gone"); err == nil {
		t.Fatal("deleting a missing branch reported no error")
	}
	// A branch checked out in a worktree: git refuses it, and says so.
	if err := r.WorktreeAdd(ctx, filepath.Join(t.TempDir(), "wt"), "ralph/wt", "main"); err != nil {
		t.Fatal(err)
	}
	if err := r.DeleteBranches(ctx, "ralph/wt"); err == nil || !r.BranchExists(ctx, "ralph/wt") {
		t.Fatalf("deleting a worktree's branch: %v", err)
	}
	if err := r.ForceCheckoutBranch(ctx, "ralph/c", "clean"); err != nil {
		t.Fatal(err)
	}
	if cur, _ := r.CurrentBranch(ctx); cur != "ralph/c" {
		t.Fatalf("on %q", cur)
	}
}
