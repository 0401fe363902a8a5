package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
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
		Short: "Remove old side branches, and worktrees and branches left by parallel runs",
		Long: `Remove, saying each: the side branches of earlier runs (ralph/blocked/…, a
blocked item's work; ralph/tampered/…, files an agent changed that it may
not), never the current run's (` + "`ralph retry`" + ` may want them); the worktrees
under .ralph/worktrees and their story branches
(ralph/<feature>-stories/<story>) for stories that passed, and orphans left by
a crashed run. A blocked story's worktree and branch are kept for you unless
--force. --dry-run lists what would go and removes nothing. Refuses while a
run is active in this repository. ` + "`ralph status`" + ` counts the side branches.

With --runs KEEP it prunes the runs kept in .ralph/runs/<run id>/ instead (each
replaced run's state, events and transcripts), keeping the newest KEEP.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			ctx := cmd.Context()
			h, err := holdRun(ctx, f)
			if err != nil {
				return err
			}
			defer h.lock.Unlock()
			repo, p, st := h.repo, h.paths, h.st
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
			gone := removedWord(opts.DryRun)
			for _, e := range entries {
				dir := filepath.Join(wtRoot, e.Name())
				branch, _ := repo.At(dir).CurrentBranch(ctx)
				if status(e.Name()) == engine.ItemBlocked && !opts.Force {
					fmt.Fprintf(f.IO.ErrOut, "kept     %s (%s): the story is blocked; --force removes it\n", dir, branch)
					kept++
					continue
				}
				fmt.Fprintf(f.IO.ErrOut, "%s %s", gone, dir)
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
				fmt.Fprintf(f.IO.ErrOut, "%s branch %s\n", gone, b)
				if !opts.DryRun {
					_ = repo.DeleteBranch(ctx, b)
				}
				removed++
			}
			// Side branches (a blocked item's work, an agent's tampering)
			// of older runs; the current run's stay for `ralph retry`.
			side, err := listSideBranches(ctx, repo, st)
			if err != nil {
				return err
			}
			for _, b := range side.current {
				fmt.Fprintf(f.IO.ErrOut, "kept     branch %s (the current run's)\n", b)
				kept++
			}
			for _, b := range side.old {
				fmt.Fprintf(f.IO.ErrOut, "%s branch %s\n", gone, b)
				if !opts.DryRun {
					if err := repo.DeleteBranch(ctx, b); err != nil {
						return err
					}
				}
				removed++
			}
			if !opts.DryRun {
				_ = repo.WorktreePrune(ctx)
			}
			if opts.DryRun {
				fmt.Fprintf(f.IO.ErrOut, "ralph clean --dry-run: %d would be removed, %d kept; nothing was removed\n", removed, kept)
				return nil
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
		fmt.Fprintf(f.IO.ErrOut, "%s run %s\n", removedWord(dryRun), id)
		if !dryRun {
			if err := os.RemoveAll(filepath.Join(dir, id)); err != nil {
				return err
			}
		}
		removed++
	}
	fmt.Fprintf(f.IO.ErrOut, "ralph clean: %s removed, %d kept\n", engine.Plural(removed, "run"), len(runs)-removed)
	return nil
}

// sideKinds are the kinds of side branch a run keeps for a person:
// ralph/<kind>/<item>-<run id>[-N].
var sideKinds = []string{"blocked", "tampered"}

// sideBranches are the side branches in the repository: the current
// run's (kept by clean) and older runs' (removed by clean).
type sideBranches struct{ current, old []string }

// listSideBranches finds the side branches; st is the current run (nil
// for none: every side branch is then old).
func listSideBranches(ctx context.Context, repo *git.Repo, st *engine.State) (sideBranches, error) {
	var out sideBranches
	for _, kind := range sideKinds {
		branches, err := repo.ListBranches(ctx, "ralph/"+kind+"/")
		if err != nil {
			return out, err
		}
		for _, b := range branches {
			if !strings.HasPrefix(b, "ralph/"+kind+"/") {
				continue
			}
			if st != nil && ownedBy(b, st.RunID) {
				out.current = append(out.current, b)
			} else {
				out.old = append(out.old, b)
			}
		}
	}
	return out, nil
}

// ownedBy reports whether a side branch was made by run id: its name ends
// with the id, or with the id and a number.
func ownedBy(branch, runID string) bool {
	if strings.HasSuffix(branch, "-"+runID) {
		return true
	}
	i := strings.LastIndex(branch, "-"+runID+"-")
	if i < 0 {
		return false
	}
	_, err := strconv.Atoi(branch[i+len(runID)+2:])
	return err == nil
}

// count is how many side branches of each kind there are, and how many
// `ralph clean` would remove.
func (s sideBranches) count() map[string]int {
	out := map[string]int{"removable": len(s.old)}
	for _, kind := range sideKinds {
		out[kind] = 0
	}
	for _, b := range append(append([]string{}, s.current...), s.old...) {
		out[strings.Split(b, "/")[1]]++
	}
	return out
}

// markdown is the status section on side branches ("" when there are
// none).
func (s sideBranches) markdown() string {
	if len(s.current)+len(s.old) == 0 {
		return ""
	}
	c := s.count()
	var parts []string
	for _, kind := range sideKinds {
		if c[kind] > 0 {
			parts = append(parts, fmt.Sprintf("%d ralph/%s/…", c[kind], kind))
		}
	}
	line := "\n## Side branches\n\n" + strings.Join(parts, ", ")
	if len(s.old) > 0 {
		line += fmt.Sprintf("; %d of earlier runs (`ralph clean --dry-run` lists them, `ralph clean` removes them)", len(s.old))
	}
	return line + "\n"
}

// removedWord starts a line of what clean removes, or would remove.
func removedWord(dryRun bool) string {
	if dryRun {
		return "would remove"
	}
	return "removed "
}
