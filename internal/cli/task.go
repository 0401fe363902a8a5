package cli

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ralph-loop/ralph/internal/source"
	"github.com/ralph-loop/ralph/internal/tasks"
	"github.com/ralph-loop/ralph/internal/usage"
)

// exitNoTask is `ralph task claim` / `ralph task next` finding no pending
// leaf task.
const exitNoTask = 3

// TaskOptions are the settings of the `ralph task` commands.
type TaskOptions struct {
	IO     *Factory
	File   string
	JSON   bool
	ID     string
	Title  string
	Parent string
	Titles []string
	Commit string
	Reason string
	Status string
}

const taskExitCodes = `Exit codes: 0 ok · 1 error (I/O, lock) · 2 invalid input (usage, bad id,
unknown task, a change the tree does not allow, an invalid tasks file; the
message names file:line) · 3 no task ready (claim without ID, next).`

// newCmdTask builds `ralph task` and its subcommands.
func newCmdTask(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use: "task",
		Example: `  ralph task add 'Parse the config'
  ralph task next
  ralph task complete 1.2`,
		Short: "Work with the task tree (tasks.jsonl and tasks-done.jsonl)",
		Long: `Read and change the task tree: tasks.jsonl holds the pending, active and
blocked tasks, tasks-done.jsonl is the append-only archive of completed ones
(with completion time and commit). Ids are dotted (A, A.1, A.1.2); leaf
tasks are the work, the others are containers that complete by themselves
when all their subtasks are complete.

Every command takes --file (default: $RALPH_TASKS_FILE, else tasks.jsonl at
the repository root, else in the current folder). Changes are made under a
lock and written atomically, so any number of processes may run these
commands at once.

Inside a ` + "`ralph run --tasks`" + ` iteration ($RALPH_ITEM_ID set), ` + "`ralph task complete ID`" + `
for the task being worked on records the agent's claim ("status":"complete");
the loop archives it after the gates pass and the branch is merged.

` + taskExitCodes,
	}
	cmd.AddCommand(
		newCmdTaskAdd(f, nil),
		newCmdTaskSplit(f, nil),
		newCmdTaskClaim(f, nil),
		newCmdTaskComplete(f, nil),
		newCmdTaskBlock(f, nil),
		newCmdTaskRelease(f, nil),
		newCmdTaskList(f, nil),
		newCmdTaskTree(f, nil),
		newCmdTaskNext(f, nil),
		newCmdTaskShow(f, nil),
	)
	return cmd
}

func taskCommand(f *Factory, opts *TaskOptions, cmd *cobra.Command, runF func(*TaskOptions) error, run func(context.Context, *TaskOptions) error) *cobra.Command {
	cmd.Flags().StringVar(&opts.File, "file", "", "tasks `FILE` (default $RALPH_TASKS_FILE, else tasks.jsonl at the repository root)")
	if fields := strings.Fields(cmd.Use); len(fields) > 1 && strings.Contains(fields[1], "ID") {
		cmd.ValidArgsFunction = completeTasks(opts)
	}
	if cmd.Long == "" {
		cmd.Long = cmd.Short + "."
	}
	cmd.Long += "\n\n" + taskExitCodes
	inner := cmd.RunE
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if inner != nil {
			if err := inner(c, args); err != nil {
				return err
			}
		}
		if runF != nil {
			return runF(opts)
		}
		return run(c.Context(), opts)
	}
	return cmd
}

// newCmdTaskAdd builds `ralph task add`.
func newCmdTaskAdd(f *Factory, runF func(*TaskOptions) error) *cobra.Command {
	opts := &TaskOptions{IO: f}
	cmd := &cobra.Command{
		Use:   "add [ID] TITLE",
		Short: "Add a pending leaf task",
		Long: `Add a pending leaf task and print its id. Without ID the next free one is
taken: the next child number under --parent, or the next top-level letter.
A leaf parent becomes a container.`,
		Example: `  ralph task add A.3 "add logout endpoint"
  ralph task add --parent A "add logout endpoint"
  ralph task add "write the docs"`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 2 {
				opts.ID, opts.Title = args[0], args[1]
			} else {
				opts.Title = args[0]
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&opts.Parent, "parent", "", "parent task `ID`")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the new task's line")
	return taskCommand(f, opts, cmd, runF, func(ctx context.Context, o *TaskOptions) error {
		var t *tasks.Task
		err := o.update(ctx, func(set *tasks.Set) (err error) {
			t, err = set.Add(o.ID, o.Title, o.Parent)
			return err
		})
		if err != nil {
			return err
		}
		o.printTasks(t)
		return nil
	})
}

// newCmdTaskSplit builds `ralph task split`.
func newCmdTaskSplit(f *Factory, runF func(*TaskOptions) error) *cobra.Command {
	opts := &TaskOptions{IO: f}
	cmd := &cobra.Command{
		Use:   "split ID TITLE...",
		Short: "Turn a task into a container of new subtasks",
		Long: `Turn task ID into a container of new pending leaf subtasks, one per title
(ID.1, ID.2, … after any existing children), and print their ids.`,
		Example: `  ralph task split A.2 "parse the form" "check the password" "set the cookie"`,
		Args:    cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.ID, opts.Titles = args[0], args[1:]
			return nil
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the new tasks' lines")
	return taskCommand(f, opts, cmd, runF, func(ctx context.Context, o *TaskOptions) error {
		var kids []*tasks.Task
		err := o.update(ctx, func(set *tasks.Set) (err error) {
			kids, err = set.Split(o.ID, o.Titles)
			return err
		})
		if err != nil {
			return err
		}
		o.printTasks(kids...)
		return nil
	})
}

// newCmdTaskClaim builds `ralph task claim`.
func newCmdTaskClaim(f *Factory, runF func(*TaskOptions) error) *cobra.Command {
	opts := &TaskOptions{IO: f}
	cmd := &cobra.Command{
		Use: "claim [ID]",
		Example: `  ralph task claim
  ralph task claim 1.2`,
		Short: "Mark the next pending leaf task (or ID) active",
		Long: `Mark a pending leaf task active and print its id: the given one, or the
next pending leaf in id order (skipping blocked containers). Exit 3 when no
task is ready.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				opts.ID = args[0]
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the claimed task's line")
	return taskCommand(f, opts, cmd, runF, func(ctx context.Context, o *TaskOptions) error {
		var t *tasks.Task
		err := o.update(ctx, func(set *tasks.Set) (err error) {
			t, err = set.Claim(o.ID)
			return err
		})
		if errors.Is(err, tasks.ErrNoTask) {
			fmt.Fprintf(o.IO.IO.ErrOut, "ralph: no task ready: %v\n", err)
			return &exitError{code: exitNoTask}
		}
		if err != nil {
			return err
		}
		o.printTasks(t)
		return nil
	})
}

// newCmdTaskComplete builds `ralph task complete`.
func newCmdTaskComplete(f *Factory, runF func(*TaskOptions) error) *cobra.Command {
	opts := &TaskOptions{IO: f}
	cmd := &cobra.Command{
		Use:     "complete ID",
		Example: `  ralph task complete 1.2`,
		Short:   "Complete a leaf task (archive it), or claim it done inside a loop",
		Long: `Move leaf task ID to tasks-done.jsonl with the completion time and
--commit, then every parent whose subtasks are now all complete.

Inside a ralph loop iteration working on ID ($RALPH_ITEM_ID=ID), this only
records the agent's claim: the task gets "status":"complete" in tasks.jsonl
and the loop archives it, with its squash commit, once the gates pass and
the branch is merged. Inside an iteration on another task it is refused.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.ID = args[0]
			return nil
		},
	}
	cmd.Flags().StringVar(&opts.Commit, "commit", "", "`SHA` of the commit that completes the task")
	return taskCommand(f, opts, cmd, runF, runTaskComplete)
}

func runTaskComplete(ctx context.Context, o *TaskOptions) error {
	w := o.IO.IO.ErrOut
	if cur := os.Getenv("RALPH_ITEM_ID"); cur != "" && os.Getenv("RALPH_RUN_ID") != "" {
		if cur != o.ID {
			return usage.Errorf("this ralph loop iteration works on task %s; only the loop completes other tasks (complete %s, or add/split tasks instead)", cur, cur)
		}
		st, err := o.store(ctx)
		if err != nil {
			return err
		}
		if held := st.Held(); !held[o.ID] {
			ids := []string{o.ID}
			for id := range held {
				ids = append(ids, id)
			}
			if err := st.SetHold(ids...); err != nil {
				return err
			}
		}
		err = o.update(ctx, func(set *tasks.Set) error {
			t, ok := set.Get(o.ID)
			switch {
			case !ok:
				return fmt.Errorf("%w: %s", tasks.ErrNotFound, o.ID)
			case t.Archived():
				return fmt.Errorf("task %s is already complete", o.ID)
			case !t.Leaf:
				return fmt.Errorf("task %s has subtasks; it completes by itself when all of them are complete", o.ID)
			}
			t.Status = tasks.StatusComplete
			return nil
		})
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "ralph: task %s marked complete; the loop archives it after its gates pass and the branch is merged\n", o.ID)
		return nil
	}
	var done []*tasks.Task
	err := o.update(ctx, func(set *tasks.Set) (err error) {
		done, err = set.Complete(o.ID, o.Commit, time.Now())
		return err
	})
	if err != nil {
		return err
	}
	for _, t := range done {
		fmt.Fprintf(o.IO.IO.Out, "%s\n", t.ID)
	}
	return nil
}

// newCmdTaskBlock builds `ralph task block`.
func newCmdTaskBlock(f *Factory, runF func(*TaskOptions) error) *cobra.Command {
	opts := &TaskOptions{IO: f}
	cmd := &cobra.Command{
		Use:     "block ID --reason REASON",
		Example: `  ralph task block 1.2 --reason 'needs an API key'`,
		Short:   "Mark a task blocked with a reason",
		Long: `Mark task ID blocked with a reason. The loop skips blocked tasks (and every
task inside a blocked container). ` + "`ralph task release ID`" + ` unblocks it.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.ID = args[0]
			return nil
		},
	}
	cmd.Flags().StringVar(&opts.Reason, "reason", "", "`REASON` the task is blocked (required)")
	requireFlags(cmd, "reason")
	return taskCommand(f, opts, cmd, runF, func(ctx context.Context, o *TaskOptions) error {
		return o.update(ctx, func(set *tasks.Set) error { return set.Block(o.ID, o.Reason) })
	})
}

// newCmdTaskRelease builds `ralph task release`.
func newCmdTaskRelease(f *Factory, runF func(*TaskOptions) error) *cobra.Command {
	opts := &TaskOptions{IO: f}
	cmd := &cobra.Command{
		Use:     "release ID",
		Example: `  ralph task release 1.2`,
		Short:   "Put an active or blocked task back to pending",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.ID = args[0]
			return nil
		},
	}
	return taskCommand(f, opts, cmd, runF, func(ctx context.Context, o *TaskOptions) error {
		return o.update(ctx, func(set *tasks.Set) error {
			_, err := set.Release(o.ID)
			return err
		})
	})
}

// newCmdTaskList builds `ralph task list`.
func newCmdTaskList(f *Factory, runF func(*TaskOptions) error) *cobra.Command {
	opts := &TaskOptions{IO: f}
	cmd := &cobra.Command{
		Use: "list",
		Example: `  ralph task list
  ralph task list --status pending`,
		Short: "List tasks",
		Long: `List the tasks of tasks.jsonl in id order, one per line: id, status, leaf or
container, title (and the reason of blocked ones), then (on standard error)
the gates a task run checks them with, from .ralph/config.yaml and your
own config, read as ` + "`ralph run --tasks`" + ` reads them: a config it would refuse
is refused here, naming the file and line. --status filters (pending,
active, blocked, complete; complete includes the archive). --json prints
the lines as stored.`,
		Args: cobra.NoArgs,
	}
	cmd.Flags().StringVar(&opts.Status, "status", "", "only tasks with this `STATUS`: "+strings.Join(tasks.Statuses, ", "))
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print JSON lines")
	return taskCommand(f, opts, cmd, runF, func(ctx context.Context, o *TaskOptions) error {
		if o.Status != "" && !tasks.ValidStatus(o.Status) {
			return usage.Errorf("--status %q: use one of %s", o.Status, strings.Join(tasks.Statuses, ", "))
		}
		set, err := o.load(ctx)
		if err != nil {
			return err
		}
		// The gates a task run would use, read as it reads them: a
		// config.yaml it would refuse is refused here too.
		gates, err := o.configGates(ctx)
		if err != nil {
			return err
		}
		list := set.List(o.Status)
		if o.JSON {
			o.printTasks(list...)
			return nil
		}
		defer fmt.Fprintln(o.IO.IO.ErrOut, gates)
		w := o.IO.IO.Out
		for _, t := range list {
			kind := "leaf"
			if !t.Leaf {
				kind = "container"
			}
			line := fmt.Sprintf("%-10s %-8s %-9s %s", t.ID, t.Status, kind, t.Title)
			if t.Reason != "" && t.Status == tasks.StatusBlocked {
				line += "  — " + t.Reason
			}
			fmt.Fprintln(w, line)
		}
		return nil
	})
}

// configGates is the line naming the gates a task run would use (the
// config's gates:), or why it would refuse to start without one; the
// error of a config it could not read.
func (o *TaskOptions) configGates(ctx context.Context) (string, error) {
	root, _, err := o.IO.Repo(ctx)
	if err != nil {
		return "", nil // no repository: no config of one either
	}
	l, err := o.IO.Settings(root)
	if err != nil {
		return "", err
	}
	if len(l.Gates) == 0 {
		return "gates: none in .ralph/config.yaml or your config: `ralph run --tasks` needs --gate NAME=COMMAND (or gates: in the config), or --no-gates", nil
	}
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(l.Gates)) {
		parts = append(parts, name+": "+l.Gates[name])
	}
	from := ""
	if origins := l.From["gates"]; len(origins) > 0 {
		from = " (" + origins[len(origins)-1].String() + ")"
	}
	return "gates" + from + ": " + strings.Join(parts, ", "), nil
}

// newCmdTaskTree builds `ralph task tree`.
func newCmdTaskTree(f *Factory, runF func(*TaskOptions) error) *cobra.Command {
	opts := &TaskOptions{IO: f}
	cmd := &cobra.Command{
		Use:     "tree",
		Example: `  ralph task tree`,
		Short:   "Print the task tree with status marks",
		Long: `Print every task, archived ones included, indented by depth:
[ ] pending · [>] active · [!] blocked (with the reason) · [x] complete.`,
		Args: cobra.NoArgs,
	}
	return taskCommand(f, opts, cmd, runF, func(ctx context.Context, o *TaskOptions) error {
		set, err := o.load(ctx)
		if err != nil {
			return err
		}
		fmt.Fprint(o.IO.IO.Out, set.Tree())
		return nil
	})
}

// newCmdTaskNext builds `ralph task next`.
func newCmdTaskNext(f *Factory, runF func(*TaskOptions) error) *cobra.Command {
	opts := &TaskOptions{IO: f}
	cmd := &cobra.Command{
		Use:     "next",
		Example: `  ralph task next`,
		Short:   "Print the next pending leaf task without claiming it",
		Long:    `Print the id of the next pending leaf task in id order without claiming it. Exit 3 when no task is ready.`,
		Args:    cobra.NoArgs,
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the task's line")
	return taskCommand(f, opts, cmd, runF, func(ctx context.Context, o *TaskOptions) error {
		set, err := o.load(ctx)
		if err != nil {
			return err
		}
		t := set.Next()
		if t == nil {
			fmt.Fprintln(o.IO.IO.ErrOut, "ralph: no task ready: no pending leaf task")
			return &exitError{code: exitNoTask}
		}
		o.printTasks(t)
		return nil
	})
}

// newCmdTaskShow builds `ralph task show`.
func newCmdTaskShow(f *Factory, runF func(*TaskOptions) error) *cobra.Command {
	opts := &TaskOptions{IO: f}
	cmd := &cobra.Command{
		Use:     "show ID",
		Example: `  ralph task show 1.2`,
		Short:   "Show one task, active or archived",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.ID = args[0]
			return nil
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the task's line")
	return taskCommand(f, opts, cmd, runF, func(ctx context.Context, o *TaskOptions) error {
		set, err := o.load(ctx)
		if err != nil {
			return err
		}
		t, ok := set.Get(o.ID)
		if !ok {
			return inputErr(fmt.Errorf("%w: %s", tasks.ErrNotFound, o.ID))
		}
		if o.JSON {
			o.printTasks(t)
			return nil
		}
		w := o.IO.IO.Out
		fmt.Fprintf(w, "id: %s\ntitle: %s\nstatus: %s\nleaf: %t\n", t.ID, t.Title, t.Status, t.Leaf)
		if p := t.Parent(); p != "" {
			fmt.Fprintf(w, "parent: %s\n", p)
		}
		var kids []string
		for _, c := range set.List("") {
			if c.Parent() == t.ID {
				kids = append(kids, c.ID)
			}
		}
		if len(kids) > 0 {
			fmt.Fprintf(w, "subtasks: %s\n", strings.Join(kids, ", "))
		}
		for _, kv := range [][2]string{{"reason", t.Reason}, {"completed", t.Completed}, {"commit", t.Commit}} {
			if kv[1] != "" {
				fmt.Fprintf(w, "%s: %s\n", kv[0], kv[1])
			}
		}
		file := filepath.Base(o.File)
		if t.Archived() {
			file = filepath.Base(tasks.Open(o.File).DonePath)
		}
		if t.LineNo() > 0 {
			fmt.Fprintf(w, "line: %s:%d\n", file, t.LineNo())
		}
		return nil
	})
}

// resolveFile finds the tasks file: --file, $RALPH_TASKS_FILE, the
// repository root, the working directory.
func (o *TaskOptions) resolveFile(ctx context.Context) error {
	if o.File == "" {
		o.File = os.Getenv("RALPH_TASKS_FILE")
	}
	if o.File == "" {
		wd, err := o.IO.Getwd()
		if err != nil {
			return err
		}
		dir := wd
		if top, err := o.IO.GitAt(wd).Toplevel(ctx); err == nil {
			dir = top
		}
		o.File = filepath.Join(dir, "tasks.jsonl")
	}
	if !filepath.IsAbs(o.File) {
		wd, err := o.IO.Getwd()
		if err != nil {
			return err
		}
		o.File = filepath.Join(wd, o.File)
	}
	if st, err := os.Stat(o.File); err == nil && st.IsDir() {
		return usage.Errorf("%s is a folder, not a tasks file", o.File)
	}
	return nil
}

func (o *TaskOptions) store(ctx context.Context) (*tasks.Store, error) {
	if err := o.resolveFile(ctx); err != nil {
		return nil, err
	}
	return tasks.Open(o.File), nil
}

func (o *TaskOptions) load(ctx context.Context) (*tasks.Set, error) {
	st, err := o.store(ctx)
	if err != nil {
		return nil, err
	}
	set, err := st.Load()
	if err != nil {
		return nil, inputErr(err)
	}
	for _, w := range set.Warnings() {
		fmt.Fprintf(o.IO.IO.ErrOut, "ralph: warning: %s\n", w)
	}
	return set, nil
}

// update runs fn under the store's lock; fn's errors are the caller's
// input problems (exit 2), as are validation errors.
func (o *TaskOptions) update(ctx context.Context, fn func(*tasks.Set) error) error {
	st, err := o.store(ctx)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(o.File), 0o755); err != nil {
		return err
	}
	o.keepOutOfGit(ctx, st)
	err = st.Update(func(set *tasks.Set) error {
		if err := fn(set); err != nil {
			return &source.InputError{Err: err}
		}
		return nil
	})
	return inputErr(err)
}

// keepOutOfGit lists the task file's lock and hold files in
// .git/info/exclude before a command first creates them, so `git status`
// never shows ralph's bookkeeping (git is asked only while the lock file
// does not exist yet).
func (o *TaskOptions) keepOutOfGit(ctx context.Context, st *tasks.Store) {
	if _, err := os.Stat(st.LockPath); err == nil {
		return
	}
	repo := o.IO.GitAt(filepath.Dir(o.File))
	top, err := repo.Toplevel(ctx)
	if err != nil {
		return // not in a git repository
	}
	if real, err := filepath.EvalSymlinks(top); err == nil {
		top = real
	}
	dir, err := filepath.EvalSymlinks(filepath.Dir(o.File))
	if err != nil {
		return
	}
	for _, p := range []string{st.LockPath, st.HoldPath} {
		if rel, err := filepath.Rel(top, filepath.Join(dir, filepath.Base(p))); err == nil && !strings.HasPrefix(rel, "..") {
			_ = repo.EnsureExcluded(ctx, "/"+filepath.ToSlash(rel))
		}
	}
}

// inputErr marks validation and not-found errors as invalid input.
func inputErr(err error) error {
	var ve *tasks.ValidationError
	var ie *source.InputError
	if err == nil || errors.As(err, &ie) {
		return err
	}
	if errors.As(err, &ve) || errors.Is(err, tasks.ErrNotFound) {
		return &source.InputError{Err: err}
	}
	return err
}

func (o *TaskOptions) printTasks(list ...*tasks.Task) {
	w := o.IO.IO.Out
	for _, t := range list {
		if o.JSON {
			fmt.Fprintf(w, "%s\n", t.Encode())
		} else {
			fmt.Fprintln(w, t.ID)
		}
	}
}

// --- `ralph run --tasks` ---
