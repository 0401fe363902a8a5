package cli

import (
	"context"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ralph-loop/ralph/internal/agent"
	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/runfolder"
)

// Shell completions (`ralph completion bash|zsh|fish|powershell`): the
// values a flag or an argument can take, read from the repository where
// they live.

type completeFunc = func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective)

// completeValues offers a fixed list.
func completeValues(values ...string) completeFunc {
	return func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return values, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeAgents offers the agents ralph knows (--agent, --summarizer).
func completeAgents(cmd *cobra.Command, flags ...string) {
	for _, name := range flags {
		_ = cmd.RegisterFlagCompletionFunc(name, completeValues(agent.Names()...))
	}
}

// completeRunFolders offers the run folders (ralph/runs/<id>) as paths
// from the repository root, or as ids.
func completeRunFolders(f *Factory, asIDs bool) completeFunc {
	return func(cmd *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		root, _, err := f.Repo(context.Background())
		if err != nil {
			return nil, cobra.ShellCompDirectiveDefault
		}
		runs, _ := runfolder.List(root)
		var out []cobra.Completion
		for _, r := range runs {
			if asIDs {
				out = append(out, r.ID)
			} else {
				out = append(out, filepath.ToSlash(filepath.Join(runfolder.Parent, r.ID)))
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeItems offers the items of the current or last run (story ids,
// task ids, stage ids); waiting only: those whose plan waits for approval.
func completeItems(f *Factory, waiting bool) completeFunc {
	return func(cmd *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		root, _, err := f.Repo(context.Background())
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		st, _, err := engine.LoadOrRebuildState(engine.PathsFor(root))
		if err != nil || st == nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ids := st.Order
		if waiting {
			ids = engine.Waiting(st)
		}
		out := make([]cobra.Completion, 0, len(ids))
		for _, id := range ids {
			out = append(out, cobra.CompletionWithDesc(id, st.Items[id].Title))
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeTasks offers the task tree's open task ids (for the task
// commands that take an ID first).
func completeTasks(opts *TaskOptions) completeFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		s, err := opts.store(cmd.Context())
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		set, err := s.Load()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []cobra.Completion
		for _, t := range set.List("") {
			if t.Status != "complete" && strings.HasPrefix(t.ID, toComplete) {
				out = append(out, cobra.CompletionWithDesc(t.ID, t.Title))
			}
			if len(out) >= 200 {
				break // a shell list, not the whole tree
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}
