package git

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ralph-loop/ralph/internal/proc"
)

// addingReason is the lock reason `git worktree add` writes into the new
// worktree's admin entry (<common>/worktrees/<name>/locked) before it
// checks the tree out, and removes when it is done (ralph runs git with
// LC_ALL=C, so the reason is never translated). A git killed in between
// leaves the lock: prune keeps a locked entry, and every later add of that
// path fails ("missing but locked worktree") until someone clears it.
const addingReason = "initializing"

// RepairHalfAdded removes the linked worktrees at or under dir that a
// killed `git worktree add` left half-made: the admin entry still locked
// with add's own reason, and no `git worktree add` of that path running
// any more. Each is unlocked and removed, folder and admin entry. A
// worktree elsewhere, or one locked for another reason (a person's
// `git worktree lock`), is never touched. It returns the folders removed.
// It lists and removes worktrees: the caller keeps it from running beside
// an add of its own.
func (r *Repo) RepairHalfAdded(ctx context.Context, dir string) ([]string, error) {
	common, err := r.CommonDir(ctx)
	if err != nil {
		return nil, err
	}
	locks, _ := filepath.Glob(filepath.Join(common, "worktrees", "*", "locked"))
	if len(locks) == 0 {
		return nil, nil // the usual case: one directory read
	}
	root := realPath(dir)
	var removed []string
	for _, lock := range locks {
		reason, err := os.ReadFile(lock)
		if err != nil || strings.TrimSpace(string(reason)) != addingReason {
			continue
		}
		path := linkedPath(filepath.Dir(lock))
		if path == "" || (path != root && !strings.HasPrefix(path, root+string(filepath.Separator))) {
			continue
		}
		if worktreeAdding(path) {
			continue // still being added (an orphan of a crashed run): not half-made yet
		}
		if err := r.removeHalfAdded(ctx, path); err != nil {
			return removed, err
		}
		removed = append(removed, path)
	}
	return removed, nil
}

// removeHalfAdded unlocks the worktree at path and removes it; a folder
// git will not remove (no .git file yet, or no folder at all) is deleted
// and the entry pruned.
func (r *Repo) removeHalfAdded(ctx context.Context, path string) error {
	if _, err := r.Run(ctx, "worktree", "unlock", path); err != nil {
		return err
	}
	if r.WorktreeRemove(ctx, path) == nil {
		return nil
	}
	if err := os.RemoveAll(path); err != nil {
		return err
	}
	return r.WorktreePrune(ctx)
}

// linkedPath is the folder of the linked worktree whose admin entry is
// admin (its gitdir file names the folder's .git file), or "" when the
// entry does not say (git was killed before writing it).
func linkedPath(admin string) string {
	b, err := os.ReadFile(filepath.Join(admin, "gitdir"))
	if err != nil {
		return ""
	}
	p := strings.TrimSpace(string(b))
	if p == "" {
		return ""
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(admin, p)
	}
	return filepath.Dir(filepath.Clean(p))
}

// worktreeAdding reports whether a `git worktree add` of path still runs.
// Where processes cannot be listed (no /proc), nothing can be told: the
// run lock says the ralph that started the add is gone.
func worktreeAdding(path string) bool {
	running, _ := proc.Running(func(argv []string) bool {
		i := slices.Index(argv, "worktree")
		if i < 0 || i+1 >= len(argv) || argv[i+1] != "add" {
			return false
		}
		for _, a := range argv[i+2:] {
			if filepath.IsAbs(a) && realPath(a) == path {
				return true
			}
		}
		return false
	})
	return running
}

// realPath is p with symbolic links resolved as git records worktree
// paths; a p that does not exist (yet, or any more) resolves its parent.
func realPath(p string) string {
	p = filepath.Clean(p)
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	if r, err := filepath.EvalSymlinks(filepath.Dir(p)); err == nil {
		return filepath.Join(r, filepath.Base(p))
	}
	return p
}
