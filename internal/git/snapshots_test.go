package git

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The snapshots' index files a killed ralph left in .git (and in a
// worktree's git folder), with the lock a git killed with it left, are
// removed; those of a live ralph, and anything else, stay.
func TestRemoveDeadSnapshots(t *testing.T) {
	gitDir := t.TempDir()
	wt := filepath.Join(gitDir, "worktrees", "a")
	if err := os.MkdirAll(wt, 0o755); err != nil {
		t.Fatal(err)
	}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	name := func(pid int) string { return fmt.Sprintf("%s%d-123.index", snapshotPrefix, pid) }
	files := map[string]bool{ // path → removed
		filepath.Join(gitDir, name(dead.Process.Pid)):         true,
		filepath.Join(gitDir, name(dead.Process.Pid)+".lock"): true,
		filepath.Join(wt, name(dead.Process.Pid)):             true,
		filepath.Join(gitDir, snapshotPrefix+"old.index"):     true, // no pid: nobody's
		filepath.Join(gitDir, name(os.Getpid())):              false,
		filepath.Join(wt, name(os.Getpid())+".lock"):          false,
		filepath.Join(gitDir, "index"):                        false,
		filepath.Join(gitDir, "ralph-tree-1.index"):           false,
	}
	for f := range files {
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	removed := RemoveDeadSnapshots(gitDir)
	for f, gone := range files {
		_, err := os.Stat(f)
		if gone != os.IsNotExist(err) {
			t.Errorf("%s: removed %v, want %v", f, os.IsNotExist(err), gone)
		}
		if slices.Contains(removed, f) != gone {
			t.Errorf("%s: reported removed %v, want %v", f, slices.Contains(removed, f), gone)
		}
	}
}

// Blobs reads many blobs in one call, byte for byte (a blob without a
// final newline, one with a newline inside, an empty one), and a missing
// object is an error, not an empty file.
func TestBlobs(t *testing.T) {
	ctx := context.Background()
	r, dir := newTestRepo(t)
	contents := map[string]string{"a.txt": "no newline", "b.txt": "two\nlines\n", "c.txt": ""}
	for p, s := range contents {
		if err := os.WriteFile(filepath.Join(dir, p), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.AddAll(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Commit(ctx, "files\n", false); err != nil {
		t.Fatal(err)
	}
	ids, err := r.BlobIDs(ctx, "HEAD", []string{"a.txt", "b.txt", "c.txt"})
	if err != nil || len(ids) != 3 {
		t.Fatalf("%v %v", ids, err)
	}
	var list []string
	for _, id := range ids {
		list = append(list, id)
	}
	got, err := r.Blobs(ctx, list)
	if err != nil {
		t.Fatal(err)
	}
	for p, id := range ids {
		if string(got[id]) != contents[p] {
			t.Errorf("%s: got %q, want %q", p, got[id], contents[p])
		}
	}
	if _, err := r.Blobs(ctx, []string{strings.Repeat("0", len(list[0]))}); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("a missing object: %v", err)
	}
}
