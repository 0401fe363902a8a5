package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/git"
	"github.com/ralph-loop/ralph/internal/store"
	"github.com/ralph-loop/ralph/internal/tasks"
	"github.com/ralph-loop/ralph/internal/usage"
)

// RetryOptions are `ralph retry`'s settings.
type RetryOptions struct {
	IO  *Factory
	IDs []string
}

// newCmdRetry builds `ralph retry`.
func newCmdRetry(f *Factory, runF func(*RetryOptions) error) *cobra.Command {
	opts := &RetryOptions{IO: f}
	return &cobra.Command{
		Use:   "retry [ID…]",
		Short: "Reopen the last run's blocked items with their attempts reset; ralph run then continues",
		Long: `Reopen blocked items of the last run in this repository (every blocked one
when no ID is given): each becomes pending again with its attempts and
iterations reset, and keeps its last failure as the next prompt's retry
context. A task's blocked mark in the tasks file is cleared too. The next
` + "`ralph run`" + ` continues the run, the passed items kept.

The work a blocked item left stays on its ralph/blocked/… branch (` + "`ralph clean`" + `
removes old ones). Fix what blocked it first (the reason is in ` + "`ralph status`" + `,
the agent's words in ` + "`ralph log`" + `). A run stopped by the circuit breaker
continues with ` + "`ralph run --reset-breaker`" + `; ` + "`ralph run --fresh`" + ` starts a new run.
Refused while a run is active; an ID the run does not know, or one that is
not blocked, is an error naming it, and nothing is changed.`,
		Example: `  ralph retry            # every blocked item
  ralph retry US-002     # just this one
  ralph retry && ralph run`,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.IDs = args
			if runF != nil {
				return runF(opts)
			}
			return runRetry(cmd.Context(), opts)
		},
	}
}

func runRetry(ctx context.Context, o *RetryOptions) error {
	f := o.IO
	h, err := holdRun(ctx, f)
	if err != nil {
		return err
	}
	defer h.lock.Unlock()
	root, p, st, note := h.root, h.paths, h.st, h.note
	if st == nil {
		return usage.Errorf("no ralph run in %s yet: nothing to retry", root)
	}
	if note != "" {
		fmt.Fprintf(f.IO.ErrOut, "ralph retry: %s (rebuilt from the event log)\n", note)
	}
	ids, err := st.Retryable(o.IDs)
	if err != nil {
		return err
	}
	// A task's blocked mark lives in the tasks file too: cleared first,
	// so a crash before the state is written leaves a pending task the
	// next run reopens by itself.
	if st.Source == "tasks" {
		err := tasks.Open(st.SourcePath).Update(func(set *tasks.Set) error {
			for _, id := range ids {
				if t, ok := set.Get(id); ok && !t.Archived() && t.Status == tasks.StatusBlocked {
					if _, err := set.Release(id); err != nil {
						return err
					}
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	if err := engine.Reopen(p, st, ids, time.Now()); err != nil {
		return err
	}
	fmt.Fprintf(f.IO.ErrOut, "ralph: reopened %s (attempts reset): `ralph run` continues run %s\n", strings.Join(ids, ", "), st.RunID)
	return nil
}

// heldRun is a repository's saved run with the run lock held: commands
// that change a run which is not running (retry, clean) take it so that
// no run starts meanwhile.
type heldRun struct {
	root  string
	repo  *git.Repo
	paths engine.Paths
	lock  *store.RunLock
	st    *engine.State // nil: no run yet
	note  string        // set when the state was rebuilt from the event log
}

// holdRun takes the run lock (refused while a run holds it) and reads the
// saved state; the caller unlocks.
func holdRun(ctx context.Context, f *Factory) (*heldRun, error) {
	root, repo, err := f.Repo(ctx)
	if err != nil {
		return nil, err
	}
	h := &heldRun{root: root, repo: repo, paths: engine.PathsFor(root)}
	if h.lock, err = store.TryLock(h.paths.Lock); err != nil {
		return nil, err
	}
	if h.st, h.note, err = engine.LoadOrRebuildState(h.paths); err != nil {
		h.lock.Unlock()
		return nil, err
	}
	return h, nil
}
