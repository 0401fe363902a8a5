package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/git"
	"github.com/ralph-loop/ralph/internal/store"
)

// CleanOptions are `ralph clean`'s settings.
type CleanOptions struct {
	IO     *Factory
	Force  bool
	DryRun bool
	// KeepRuns, when 0 or more (--runs), prunes the kept runs in
	// .ralph/runs instead, keeping the newest KeepRuns.
	KeepRuns int
}

// newCmdClean builds `ralph clean`.
func newCmdClean(f *Factory, runF func(*CleanOptions) error) *cobra.Command {
	opts := &CleanOptions{IO: f, KeepRuns: -1}
	cmd := &cobra.Command{
		Use: "clean",
		Example: `  ralph clean --dry-run
  ralph clean --runs 3   # keep the 3 newest runs`,
		Short: "Remove worktrees and branches left by parallel runs",
		Long: `Remove the worktrees under .ralph/worktrees and their story branches
(ralph/<feature>-stories/<story>) for stories that passed, and orphans left by
a crashed run. A blocked story's worktree and branch are kept for you unless
--force. Refuses while a run is active in this repository.

With --runs KEEP it prunes the runs kept in .ralph/runs/<run id>/ instead (each
replaced run's state, events and transcripts), keeping the newest KEEP.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			ctx := cmd.Context()
			root, repo, err := f.Repo(ctx)
			if err != nil {
				return err
			}
			p := engine.PathsFor(root)
			lock, err := store.TryLock(p.Lock)
			if err != nil {
				return err
			}
			defer lock.Unlock()
			st, _, err := engine.LoadOrRebuildState(p)
			if err != nil {
				return err
			}
			if opts.KeepRuns >= 0 {
				current := ""
				if st != nil {
					current = st.RunID
				}
				return pruneRuns(f, filepath.Join(p.Dir, "runs"), opts.KeepRuns, current, opts.DryRun)
			}
			status := func(dirName string) string {
				if st == nil {
					return ""
				}
				for id, is := range st.Items {
					if filepath.Base(dirName) == git.Slug(id, 60) {
						return is.Status
					}
				}
				return ""
			}
			wtRoot := filepath.Join(p.Dir, "worktrees")
			entries, _ := os.ReadDir(wtRoot)
			removed, kept := 0, 0
			for _, e := range entries {
				dir := filepath.Join(wtRoot, e.Name())
				branch, _ := repo.At(dir).CurrentBranch(ctx)
				if status(e.Name()) == engine.ItemBlocked && !opts.Force {
					fmt.Fprintf(f.IO.ErrOut, "kept     %s (%s): the story is blocked; --force removes it\n", dir, branch)
					kept++
					continue
				}
				fmt.Fprintf(f.IO.ErrOut, "removed  %s", dir)
				if !opts.DryRun {
					if err := repo.WorktreeRemove(ctx, dir); err != nil {
						_ = os.RemoveAll(dir)
					}
				}
				if branch != "" && strings.Contains(branch, "-stories/") {
					fmt.Fprintf(f.IO.ErrOut, " and branch %s", branch)
					if !opts.DryRun {
						_ = repo.DeleteBranch(ctx, branch)
					}
				}
				fmt.Fprintln(f.IO.ErrOut)
				removed++
			}
			// Story branches whose worktree is already gone.
			branches, err := repo.ListBranches(ctx, "ralph/")
			if err != nil {
				return err
			}
			for _, b := range branches {
				if !strings.Contains(b, "-stories/") {
					continue
				}
				name := b[strings.LastIndex(b, "/")+1:]
				if _, err := os.Stat(filepath.Join(wtRoot, name)); err == nil {
					continue
				}
				if status(name) == engine.ItemBlocked && !opts.Force {
					kept++
					continue
				}
				fmt.Fprintf(f.IO.ErrOut, "removed  branch %s\n", b)
				if !opts.DryRun {
					_ = repo.DeleteBranch(ctx, b)
				}
				removed++
			}
			if !opts.DryRun {
				_ = repo.WorktreePrune(ctx)
			}
			fmt.Fprintf(f.IO.ErrOut, "ralph clean: %d removed, %d kept\n", removed, kept)
			return nil
		},
	}
	cmd.Flags().BoolVar(&opts.Force, "force", false, "also remove blocked stories' worktrees and branches")
	cmd.Flags().BoolVar(&opts.DryRun, "dry-run", false, "say what would be removed")
	cmd.Flags().IntVar(&opts.KeepRuns, "runs", -1, "prune the runs kept in .ralph/runs, keeping the newest `KEEP` (0 removes them all)")
	return cmd
}

// pruneRuns removes the kept runs under dir beyond the newest keep,
// ordered by when each started (its kept state's started_at; the folder's
// time when that is unreadable): run ids of the same second do not sort.
func pruneRuns(f *Factory, dir string, keep int, current string, dryRun bool) error {
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	var runs []string
	started := map[string]time.Time{}
	for _, e := range entries {
		if !e.IsDir() || e.Name() == current {
			continue
		}
		runs = append(runs, e.Name())
		var st struct {
			StartedAt time.Time `json:"started_at"`
		}
		if store.ReadJSON(filepath.Join(dir, e.Name(), "state.json"), &st) == nil && !st.StartedAt.IsZero() {
			started[e.Name()] = st.StartedAt
		} else if fi, err := e.Info(); err == nil {
			started[e.Name()] = fi.ModTime()
		}
	}
	sort.Slice(runs, func(i, j int) bool {
		if a, b := started[runs[i]], started[runs[j]]; !a.Equal(b) {
			return a.Before(b)
		}
		return runs[i] < runs[j]
	})
	removed := 0
	for _, id := range runs[:max(0, len(runs)-keep)] {
		fmt.Fprintf(f.IO.ErrOut, "removed  run %s\n", id)
		if !dryRun {
			if err := os.RemoveAll(filepath.Join(dir, id)); err != nil {
				return err
			}
		}
		removed++
	}
	fmt.Fprintf(f.IO.ErrOut, "ralph clean: %d runs removed, %d kept\n", removed, len(runs)-removed)
	return nil
}
