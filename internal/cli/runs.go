package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/runfolder"
	"github.com/ralph-loop/ralph/internal/usage"
)

// RunsOptions are `ralph runs`' settings.
type RunsOptions struct {
	IO   *Factory
	Name string // new: the run's name
	PRD  string // new: the prose PRD to start from
	Run  string // lint: the run folder (or run id)
}

// newCmdRuns builds `ralph runs new|list|lint`.
func newCmdRuns(f *Factory, runF func(*RunsOptions) error) *cobra.Command {
	opts := &RunsOptions{IO: f}
	cmd := &cobra.Command{
		Use: "runs",
		Example: `  ralph runs new 'Auth flow' --prd docs/auth.md
  ralph runs lint
  ralph runs list`,
		Short: "Run folders (the Ralph Loop v2 layout): ralph/runs/<run_id>/ with PRD.md, prd.json, PROMPT.md, progress.md",
		Long: `A run folder keeps one run's spec, stories, prompt and memory in the
repository: ralph/runs/<run_id>/ holds PRD.md (the prose spec), prd.json
(the stories, each with "passes"), PROMPT.md (the prompt every iteration
gets) and progress.md (what each iteration did and learned). ` + "`ralph run RUN_DIR`" + `
runs it, after checking it is "Ralph-ready" (the Ralph Loop v2 rules, see
` + "`ralph runs lint`" + `).

Files: the agent's own (progress.md, and whatever it writes in the folder)
are part of its work and are committed with the story, like any other file
it changes; ralph's transcripts go to RUN_DIR/transcripts/, which ralph lists
in .git/info/exclude, so they are never committed and never leave the tree
dirty; ralph's own progress log stays in .ralph/progress.md.`,
		Args: cobra.NoArgs,
	}
	newCmd := &cobra.Command{
		Use:     "new NAME [--prd PRD.md]",
		Example: `  ralph runs new 'Auth flow' --prd docs/auth.md`,
		Short:   "Make ralph/runs/<date>-<name>/ with PRD.md, prd.json, PROMPT.md and progress.md",
		Long: `Make a run folder ralph/runs/<date>-<name>/ (a number is added when the
id is taken) holding PRD.md (a copy of --prd, or an outline to fill in),
prd.json (one example story to replace with yours; its branch is
ralph/<name>), PROMPT.md (every instruction a run folder requires: read first,
pick the next story where passes=false, implement + test + commit, set
passes=true only when the criteria are met, append a progress entry, the
completion promise) and progress.md. Then edit prd.json and run
` + "`ralph runs lint`" + ` and ` + "`ralph run ralph/runs/<id>`" + `.`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Name = args[0]
			if runF != nil {
				return runF(opts)
			}
			return runsNew(c, opts)
		},
	}
	newCmd.Flags().StringVar(&opts.PRD, "prd", "", "prose PRD `FILE` (markdown) to copy into the run folder as PRD.md")
	cmd.AddCommand(newCmd, &cobra.Command{
		Use:     "list",
		Example: `  ralph runs list`,
		Short:   "List the run folders with their stories passed and whether each is Ralph-ready",
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return runsList(c, opts)
		},
	}, &cobra.Command{
		Use: "lint [RUN]",
		Example: `  ralph runs lint
  ralph runs lint 20261123-auth-flow`,
		Short: "Check run folders against the Ralph-ready rules (exit 2 when one fails)",
		Long: `Check a run folder (a path or a run id; all of ralph/runs/ when none is
given) against the "Ralph-ready" rules: it is ralph/runs/<run_id>/;
PRD.md, prd.json, PROMPT.md and progress.md exist; prd.json is a valid PRD
(the checks of ` + "`ralph prd validate`" + `) whose stories all have a "passes"
field; PROMPT.md references PRD.md, prd.json and progress.md and gives the
read-first instructions, "pick next story where passes=false", "implement +
test + commit", "set passes=true only when criteria met", "append progress
entry" and the completion promise tag (<promise>…</promise>). One line per
failure; exit 2 when any fails. Writes nothing.`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: completeRunFolders(f, true),
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) == 1 {
				opts.Run = args[0]
			}
			if runF != nil {
				return runF(opts)
			}
			return runsLint(c, opts)
		},
	})
	return cmd
}

func runsNew(c *cobra.Command, o *RunsOptions) error {
	f := o.IO
	root, _, err := f.Repo(c.Context())
	if err != nil {
		return err
	}
	if strings.TrimSpace(o.Name) == "" {
		return usage.Errorf("ralph runs new: give the run a name")
	}
	var prdMD string
	if o.PRD != "" {
		b, err := os.ReadFile(o.PRD)
		if err != nil {
			return usage.Errorf("--prd: %v", err)
		}
		prdMD = string(b)
	}
	dir, err := runfolder.New(root, o.Name, prdMD, time.Now())
	if err != nil {
		return err
	}
	rel, _ := filepath.Rel(root, dir)
	fmt.Fprintf(f.IO.Out, "%s\n", rel)
	fmt.Fprintf(f.IO.ErrOut, "ralph: made %s (PRD.md, prd.json, PROMPT.md, progress.md); write the stories in prd.json, then `ralph runs lint %s` and `ralph run %s`\n", rel, rel, rel)
	return nil
}

func runsList(c *cobra.Command, o *RunsOptions) error {
	f := o.IO
	root, _, err := f.Repo(c.Context())
	if err != nil {
		return err
	}
	runs, err := runfolder.List(root)
	if err != nil {
		return err
	}
	if len(runs) == 0 {
		fmt.Fprintf(f.IO.ErrOut, "ralph: no run folders in %s (`ralph runs new NAME` makes one)\n", runfolder.Parent)
		return nil
	}
	active := activeRunFolder(root)
	w := tabwriter.NewWriter(f.IO.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "RUN\tSTORIES\tSTATE\tREADY")
	for _, r := range runs {
		stories := fmt.Sprintf("%d/%d passed", r.Passed, r.Stories)
		if r.PRDError != "" {
			stories = "prd.json invalid"
		}
		state := "not started"
		switch {
		case active[r.Dir] != "":
			state = active[r.Dir]
		case r.Stories > 0 && r.Passed == r.Stories:
			state = "complete"
		case r.Passed > 0:
			state = "in progress"
		}
		ready := "yes"
		if r.Problems > 0 {
			ready = fmt.Sprintf("no (%d problems: ralph runs lint %s)", r.Problems, r.ID)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", r.ID, stories, state, ready)
	}
	return w.Flush()
}

// activeRunFolder maps the run folder of the repository's last run (read
// from its state, without the run lock) to that run's status.
func activeRunFolder(root string) map[string]string {
	p := engine.PathsFor(root)
	st, _, err := engine.LoadOrRebuildState(p)
	if err != nil || st == nil || filepath.Base(st.SourcePath) != runfolder.PRDJSON {
		return nil
	}
	status := st.Status
	if status == engine.StatusRunning {
		if held, _ := engine.ActiveRun(p); !held {
			status = "interrupted"
		}
	}
	return map[string]string{filepath.Dir(st.SourcePath): status}
}

func runsLint(c *cobra.Command, o *RunsOptions) error {
	f := o.IO
	root, _, err := f.Repo(c.Context())
	if err != nil {
		return err
	}
	var dirs []string
	if o.Run != "" {
		dir, err := resolveRunFolder(root, o.Run)
		if err != nil {
			return err
		}
		dirs = []string{dir}
	} else {
		runs, err := runfolder.List(root)
		if err != nil {
			return err
		}
		if len(runs) == 0 {
			return usage.Errorf("no run folders in %s (`ralph runs new NAME` makes one)", runfolder.Parent)
		}
		for _, r := range runs {
			dirs = append(dirs, r.Dir)
		}
	}
	failed := 0
	for _, dir := range dirs {
		rel, _ := filepath.Rel(root, dir)
		problems := runfolder.Lint(root, dir)
		for _, p := range problems {
			fmt.Fprintln(f.IO.Out, p.String())
		}
		if len(problems) == 0 {
			fmt.Fprintf(f.IO.ErrOut, "ralph: %s is Ralph-ready\n", filepath.ToSlash(rel))
		}
		failed += len(problems)
	}
	if failed > 0 {
		return usage.Errorf("%d Ralph-ready rule(s) broken", failed)
	}
	return nil
}

// resolveRunFolder takes a path to a run folder, or a run id under
// ralph/runs/.
func resolveRunFolder(root, arg string) (string, error) {
	cands := []string{arg, filepath.Join(root, runfolder.Parent, arg)}
	if !strings.ContainsRune(arg, filepath.Separator) {
		cands[0], cands[1] = cands[1], cands[0] // a run id first
	}
	for _, cand := range cands {
		if fi, err := os.Stat(cand); err == nil && fi.IsDir() {
			return filepath.Abs(cand)
		}
	}
	return "", usage.Errorf("run folder %s does not exist (neither a folder nor a run id under %s)", arg, runfolder.Parent)
}
