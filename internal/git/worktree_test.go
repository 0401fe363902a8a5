package git

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

// A `git worktree add` killed mid-checkout leaves its tree locked with
// git's "initializing": RepairHalfAdded removes such trees under the folder
// it is given — with or without their folder — and leaves alone a tree
// elsewhere, one locked for another reason, and one whose add still runs.
func TestRepairHalfAdded(t *testing.T) {
	ctx := context.Background()
	r, dir := newTestRepo(t)
	commitFile(t, r, dir, "a.txt", "a\n", "init")
	own := filepath.Join(dir, ".ralph", "worktrees")
	add := func(path, branch, reason string) {
		t.Helper()
		if err := r.WorktreeAdd(ctx, path, branch, "main"); err != nil {
			t.Fatal(err)
		}
		if reason != "" {
			if _, err := r.Run(ctx, "worktree", "lock", "--reason", reason, path); err != nil {
				t.Fatal(err)
			}
		}
	}
	killed := filepath.Join(own, "killed")     // half-made, folder there
	gone := filepath.Join(own, "gone")         // half-made, folder removed since
	person := filepath.Join(own, "person")     // locked by a person
	adding := filepath.Join(own, "adding")     // its add still runs
	elsewhere := filepath.Join(dir, "..", "x") // not ralph's
	add(killed, "killed", addingReason)
	add(gone, "gone", addingReason)
	add(person, "person", "on a USB disk")
	add(adding, "adding", addingReason)
	add(elsewhere, "elsewhere", addingReason)
	if err := os.RemoveAll(gone); err != nil {
		t.Fatal(err)
	}
	// A process whose argv is an add of that path, as a live git's would be.
	sleeper := exec.Command("sh", "-c", "sleep 30", "git", "worktree", "add", "--quiet", adding)
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sleeper.Process.Kill(); _ = sleeper.Wait() }()

	removed, err := r.RepairHalfAdded(ctx, own)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(removed)
	if want := []string{realPath(gone), realPath(killed)}; !slices.Equal(removed, want) {
		t.Fatalf("removed %q, want %q", removed, want)
	}
	branches, err := r.WorktreeBranches(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for b, want := range map[string]bool{"killed": false, "gone": false, "person": true, "adding": true, "elsewhere": true} {
		if branches[b] != want {
			t.Errorf("worktree of %s listed: %v, want %v", b, branches[b], want)
		}
	}
	if _, err := os.Stat(killed); !os.IsNotExist(err) {
		t.Errorf("the half-made tree's folder is still there: %v", err)
	}
	// The path is free again: an add there works.
	if err := r.WorktreeAddReset(ctx, killed, "killed", "main"); err != nil {
		t.Fatal(err)
	}
	if err := r.WorktreeAddReset(ctx, gone, "gone", "main"); err != nil {
		t.Fatal(err)
	}

	// Once the add is over, its lock left behind is repaired too; a tree
	// to repair only at one path leaves the rest.
	_ = sleeper.Process.Kill()
	_ = sleeper.Wait()
	if removed, err := r.RepairHalfAdded(ctx, killed); err != nil || len(removed) != 0 {
		t.Fatalf("RepairHalfAdded(%s) = %q, %v; want nothing", killed, removed, err)
	}
	if removed, err := r.RepairHalfAdded(ctx, adding); err != nil || len(removed) != 1 {
		t.Fatalf("RepairHalfAdded(%s) = %q, %v; want it removed", adding, removed, err)
	}
}
