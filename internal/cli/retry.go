package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ralph-loop/ralph/internal/engine"
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
	root, _, err := f.Repo(ctx)
	if err != nil {
		return err
	}
	p := engine.PathsFor(root)
	lock, err := store.TryLock(p.Lock)
	if err != nil {
		return err
	}
	defer lock.Unlock()
	st, note, err := engine.LoadOrRebuildState(p)
	if err != nil {
		return err
	}
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
