package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/spf13/cobra"

	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/gate"
	"github.com/ralph-loop/ralph/internal/prd"
	"github.com/ralph-loop/ralph/internal/store"
	"github.com/ralph-loop/ralph/internal/usage"
)

// newCmdPRD builds `ralph prd`.
func newCmdPRD(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use: "prd",
		Example: `  ralph prd new --project todo-api --feature 'Task priorities'
  ralph prd import docs/spec.md
  ralph prd validate`,
		Short: "Create, import and validate PRD files",
	}
	cmd.AddCommand(newCmdPRDNew(f, nil), newCmdPRDValidate(f, nil), newCmdPRDImport(f, nil))
	return cmd
}

// PRDNewOptions are `ralph prd new`'s settings.
type PRDNewOptions struct {
	IO      *Factory
	Project string
	Feature string
	Output  string
	Force   bool
}

// newCmdPRDNew builds `ralph prd new`.
func newCmdPRDNew(f *Factory, runF func(*PRDNewOptions) error) *cobra.Command {
	opts := &PRDNewOptions{IO: f}
	cmd := &cobra.Command{
		Use:     "new --project NAME --feature NAME [-o FILE]",
		Example: `  ralph prd new --project todo-api --feature 'Task priorities' -o prd.json`,
		Short:   "Write a PRD template (snake_case format) to fill in",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			doc := prd.Template(opts.Project, opts.Feature)
			// The quality checks ralph init would find, so that the PRD
			// runs as written (a PRD without them is refused as gateless).
			found := gate.Detect(prdNewRoot(cmd.Context(), f))
			doc.QualityChecks = found.QualityChecks()
			b, err := doc.Marshal()
			if err != nil {
				return err
			}
			if opts.Output == "-" {
				_, err := f.IO.Out.Write(b)
				return err
			}
			if _, err := os.Stat(opts.Output); err == nil && !opts.Force {
				return usage.Errorf("%s already exists (use --force to overwrite)", opts.Output)
			}
			if err := store.WriteFile(opts.Output, b, 0o644); err != nil {
				return err
			}
			for _, w := range found.Why {
				fmt.Fprintf(f.IO.ErrOut, "found   %s\n", w)
			}
			if found.Empty() {
				fmt.Fprintf(f.IO.ErrOut, "ralph: no quality checks found (no go.mod, package.json, pyproject.toml, Cargo.toml or Makefile targets): add the commands that test your project to quality_checks\n")
			}
			fmt.Fprintf(f.IO.ErrOut, "ralph: wrote %s (branch %s); edit its stories, then `ralph prd validate %s`\n", opts.Output, doc.BranchName, opts.Output)
			return nil
		},
	}
	cmd.Flags().StringVar(&opts.Project, "project", "", "project `NAME` (required)")
	cmd.Flags().StringVar(&opts.Feature, "feature", "", "feature `NAME` (required)")
	cmd.Flags().StringVarP(&opts.Output, "output", "o", "prd.json", "`FILE` to write, - for stdout")
	// --prd names the file as run and status do (codetether's
	// `ralph create-prd … --prd`).
	cmd.Flags().StringVar(&opts.Output, "prd", "prd.json", "the `FILE` to write (the same as --output)")
	_ = cmd.Flags().MarkHidden("prd")
	cmd.Flags().BoolVar(&opts.Force, "force", false, "overwrite an existing file")
	requireFlags(cmd, "project", "feature")
	return cmd
}

// prdNewRoot is where a new PRD's quality checks are looked for: the
// repository, else the working directory.
func prdNewRoot(ctx context.Context, f *Factory) string {
	if root, _, err := f.Repo(ctx); err == nil {
		return root
	}
	wd, _ := f.Getwd()
	return wd
}

// newCmdCreatePRD builds `ralph create-prd`: `ralph prd new` by the name
// codetether's ralph gives it.
func newCmdCreatePRD(f *Factory) *cobra.Command {
	cmd := newCmdPRDNew(f, nil)
	cmd.Use = "create-prd --project NAME --feature NAME [--prd FILE]"
	cmd.Example = `  ralph create-prd --project MyProject --feature 'New Feature'`
	cmd.Short = "Write a PRD template with the project's quality checks (ralph prd new)"
	return cmd
}

// PRDValidateOptions are `ralph prd validate`'s settings.
type PRDValidateOptions struct {
	IO      *Factory
	File    string
	NoGates bool
}

// newCmdPRDValidate builds `ralph prd validate`.
func newCmdPRDValidate(f *Factory, runF func(*PRDValidateOptions) error) *cobra.Command {
	opts := &PRDValidateOptions{IO: f}
	cmd := &cobra.Command{
		Use: "validate [FILE]",
		Example: `  ralph prd validate
  ralph prd validate ralph/runs/20261123-auth/prd.json`,
		Short: "Check a prd.json (either format) and print every problem",
		Long: `Check a PRD in the snake_case format (user_stories, depends_on, …) or the
camelCase format of the bash Ralph (userStories, acceptanceCriteria, …).
JSON errors name file:line:col; story errors name the story and the rule
(duplicate id, unknown dependency, dependency cycle with its path, priority or
complexity out of range, missing title). A PRD with no quality gate (no
command in quality_checks, and no story with checks) is refused as
` + "`ralph run`" + ` refuses it, unless --no-gates, as for the run. Exit 2 when
invalid. Writes nothing.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.File = "prd.json"
			if len(args) == 1 {
				opts.File = args[0]
			}
			if runF != nil {
				return runF(opts)
			}
			b, err := os.ReadFile(opts.File)
			if err != nil {
				return usage.Errorf("%v", err)
			}
			// Every problem at once: the fields of the wrong type, then the
			// rules between stories (checked on what could be read).
			doc, err := prd.ParseAll(filepath.Clean(opts.File), b)
			var typeErrs prd.TypeErrors
			if err != nil && !errors.As(err, &typeErrs) {
				return err
			}
			if verr := doc.Validate(); verr != nil || err != nil {
				return errors.Join(err, verr)
			}
			deps := 0
			for _, s := range doc.Stories {
				deps += len(s.DependsOn)
			}
			gates := len(doc.QualityChecks.Gates())
			if !opts.NoGates && gates == 0 && !slices.ContainsFunc(doc.Stories, func(s prd.Story) bool { return len(s.Checks) > 0 }) {
				// What `ralph run` would say, before it is started.
				return usage.Errorf("%s: no quality gate: there are no commands in quality_checks and no story has checks, so every story would pass on the agent's word alone and `ralph run` refuses it; add the commands that test your project (`ralph init` finds them), or run with --no-gates (`ralph prd validate --no-gates` accepts it)", opts.File)
			}
			fmt.Fprintf(f.IO.Out, "%s: valid (%s format): %s, %s, %s, %s\n", opts.File, doc.Format, engine.Plural(len(doc.Stories), "story"),
				engine.Plural(deps, "dependency"), engine.Plural(len(doc.Levels()), "level"), engine.Plural(gates, "gate"))
			return nil
		},
	}
	cmd.Flags().BoolVar(&opts.NoGates, "no-gates", false, "accept a PRD without quality gates, as ralph run --no-gates does")
	return cmd
}
