package git

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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
