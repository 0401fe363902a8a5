package judge

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/ralph-loop/ralph/internal/gate"
)

// What a killed run's judging left goes when the next run opens the
// judge: a snapshot's index file in .git (its ralph is gone) and the
// index lock of a checkout no judging may take again; the checkouts'
// indexes stay.
func TestOpenRemovesWhatAKilledRunLeft(t *testing.T) {
	ctx := context.Background()
	repo, dir := testRepo(t)
	stateDir := filepath.Join(dir, ".ralph")
	j, err := New(repo, gate.Runner{}, stateDir)
	if err != nil {
		t.Fatal(err)
	}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	trees := filepath.Join(stateDir, "judge", "trees")
	if err := os.MkdirAll(trees, 0o755); err != nil {
		t.Fatal(err)
	}
	snapshot := filepath.Join(dir, ".git", fmt.Sprintf("ralph-snapshot-%d-1.index", dead.Process.Pid))
	files := map[string]bool{ // path → removed
		snapshot:                                 true,
		filepath.Join(trees, "2.index.lock"):     true,
		filepath.Join(trees, "2.index"):          false,
		filepath.Join(trees, "0.index"):          false,
		filepath.Join(dir, ".git", "index.lock"): false, // git's own: RemoveStaleLocks decides
	}
	for f := range files {
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := j.Open(ctx, "run", "", nil, nil); err != nil {
		t.Fatal(err)
	}
	for f, gone := range files {
		if _, err := os.Stat(f); gone != os.IsNotExist(err) {
			t.Errorf("%s: removed %v, want %v", f, os.IsNotExist(err), gone)
		}
	}
}
