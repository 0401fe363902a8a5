package judge

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/ralph-loop/ralph/internal/git"
	"github.com/ralph-loop/ralph/internal/proc"
)

// Trees are the judge's checkouts, one per judging at once, kept between
// judgings and between runs: switching one to the next tree writes only
// the files that differ. They live in ralph's own folder, which the
// agent's sandbox shows read-only, and are no git worktrees (nothing in
// .git/worktrees to half-make when a run is killed).
type Trees struct {
	root   string // .ralph/judge/trees
	gitDir string
	runner proc.Runner
	// Env gives each checkout the dependency folders the base had
	// (nil: none).
	Env *Env

	mu   sync.Mutex
	free []*git.Checkout
	n    int
}

// NewTrees are the checkouts under dir of the repository at gitDir.
func NewTrees(dir, gitDir string, runner proc.Runner) *Trees {
	return &Trees{root: filepath.Join(dir, "trees"), gitDir: gitDir, runner: runner}
}

// Acquire takes a free checkout (or a new one) and switches it to tree.
// Release gives it back.
func (t *Trees) Acquire(ctx context.Context, tree string) (*git.Checkout, error) {
	t.mu.Lock()
	var co *git.Checkout
	if n := len(t.free); n > 0 {
		co, t.free = t.free[n-1], t.free[:n-1]
	} else {
		dir := filepath.Join(t.root, strconv.Itoa(t.n))
		t.n++
		co = &git.Checkout{Dir: dir, Index: dir + ".index", GitDir: t.gitDir, Runner: t.runner}
	}
	t.mu.Unlock()
	var keep []string
	if t.Env != nil {
		keep = t.Env.Names()
	}
	if err := co.Switch(ctx, tree, keep); err != nil {
		t.Release(co)
		return nil, err
	}
	if t.Env != nil {
		if err := t.Env.Give(ctx, co.Dir); err != nil {
			t.Release(co)
			return nil, fmt.Errorf("giving the judge's checkout the base's dependency folders: %w", err)
		}
	}
	return co, nil
}

// Release gives a checkout back for the next judging.
func (t *Trees) Release(co *git.Checkout) {
	if co == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.free = append(t.free, co)
}

// RemoveLocks removes the index locks of the checkouts: a git killed
// in one (with a killed run, or by the next run's end of what the killed
// one left running) leaves its lock, and a checkout no judging takes
// again would keep it. The checkouts are the run's alone.
func (t *Trees) RemoveLocks() {
	locks, _ := filepath.Glob(filepath.Join(t.root, "*.index.lock"))
	for _, l := range locks {
		_ = os.Remove(l)
	}
}

// Remove deletes every checkout (`ralph clean`).
func (t *Trees) Remove() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.free, t.n = nil, 0
	return os.RemoveAll(t.root)
}
