package git

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestNotAsStaged: a clean filter (set up in .git/config and
// .gitattributes, as an agent could) stages other bytes than the file
// holds, and NotAsStaged names that file; plain files, symlinks and
// deletions staged as they are name nothing. Hooks are off for ralph's
// git, so a post-commit hook cannot move the branch either.
func TestNotAsStaged(t *testing.T) {
	ctx := context.Background()
	r, dir := newTestRepo(t)
	write := func(name, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.txt", "one\n")
	write("gone.txt", "g\n")
	r.AddAll(ctx)
	if _, err := r.Commit(ctx, "base\n", false); err != nil {
		t.Fatal(err)
	}
	all := func(string) bool { return true }
	write("a.txt", "two\n")
	write("b.txt", "new\n")
	os.Remove(filepath.Join(dir, "gone.txt"))
	if err := os.Symlink("a.txt", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := r.AddAll(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := r.NotAsStaged(ctx, all); err != nil || len(got) != 0 {
		t.Fatalf("plain changes: NotAsStaged = %v, %v; want none", got, err)
	}

	if _, err := r.Run(ctx, "config", "filter.up.clean", "tr a-z A-Z"); err != nil {
		t.Fatal(err)
	}
	write(".gitattributes", "*.txt filter=up\n")
	write("b.txt", "newer\n")
	write("a.txt", "one\n") // the filter stages it as it was: not a change to git
	if err := r.AddAll(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := r.NotAsStaged(ctx, all); err != nil || !slices.Equal(got, []string{"a.txt", "b.txt"}) {
		t.Fatalf("filtered: NotAsStaged = %v, %v; want [a.txt b.txt]", got, err)
	}

	// A post-commit hook that would amend ralph's commit never runs.
	hook := filepath.Join(dir, ".git", "hooks", "post-commit")
	os.MkdirAll(filepath.Dir(hook), 0o755)
	if err := os.WriteFile(hook, []byte("#!/bin/sh\ngit commit --amend -qm forged\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	sha, err := r.Commit(ctx, "mine\n", true)
	if err != nil {
		t.Fatal(err)
	}
	if head, _ := r.Head(ctx); head != sha {
		t.Fatalf("HEAD is %s after committing %s: a hook ran", head, sha)
	}
}
