package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ralph-loop/ralph/internal/config"
	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/gate"
	"github.com/ralph-loop/ralph/internal/prd"
	"github.com/ralph-loop/ralph/internal/store"
)

// InitOptions are `ralph init`'s settings.
type InitOptions struct {
	IO    *Factory
	Force bool
}

// newCmdInit builds `ralph init`.
func newCmdInit(f *Factory, runF func(*InitOptions) error) *cobra.Command {
	opts := &InitOptions{IO: f}
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Scaffold .ralph/config.yaml, .ralph/PROMPT.md and an example prd.json",
		Long: `Write a starting configuration into the current repository: .ralph/config.yaml
(every key is also a run flag), .ralph/PROMPT.md (the built-in prompt, to
edit; it may use {{.ItemID}}, {{.Title}}, {{.PRDPath}}, {{.Promise}}, …) and
prd.json (a template) when there is none. Existing files are kept unless
--force. .ralph/ is listed in .git/info/exclude, never in your .gitignore.

The quality gates are found in the project's own files and printed with the
reason: go.mod (go vet, go test, go build), package.json's scripts (test,
lint, typecheck or tsc, build; npm, pnpm, yarn or bun from the lock file),
pyproject.toml (pytest, ruff, mypy when it names them; install the project
first, e.g. pip install -e ., for its tests to import it), tox.ini (tox) or
noxfile.py (nox), which install the project themselves, Cargo.toml (cargo
check, clippy, test) and a Makefile's test, lint and check targets (which
win over a language's). They become the example PRD's quality_checks and
the task loop's gates in config.yaml.`,
		Example: `  ralph init
  ralph init --force   # rewrite the three files (the gates found again)`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			root, repo, err := f.Repo(cmd.Context())
			if err != nil {
				return err
			}
			if err := repo.EnsureExcluded(cmd.Context(), "/.ralph/"); err != nil {
				return err
			}
			found := gate.Detect(root)
			for _, w := range found.Why {
				fmt.Fprintf(f.IO.ErrOut, "found   %s\n", w)
			}
			switch {
			case found.Empty() && len(found.Why) == 0:
				fmt.Fprintf(f.IO.ErrOut, "found   no go.mod, package.json, pyproject.toml, tox.ini, noxfile.py, Cargo.toml or Makefile targets: prd.json has no quality_checks; add the commands that test your project (a story passes only on what they say)\n")
			case found.Empty():
				fmt.Fprintf(f.IO.ErrOut, "found   no command that tests the project: prd.json has no quality_checks; add them (a story passes only on what they say)\n")
			}
			doc := prd.Template(filepath.Base(root), "First feature")
			doc.QualityChecks = found.QualityChecks()
			tmpl, _ := doc.Marshal()
			files := []struct{ path, content string }{
				{filepath.Join(root, ".ralph", "config.yaml"), config.Template + gatesYAML(found)},
				{filepath.Join(root, ".ralph", "PROMPT.md"), engine.DefaultPrompt},
				{filepath.Join(root, "prd.json"), string(tmpl)},
			}
			for _, fl := range files {
				rel, _ := filepath.Rel(root, fl.path)
				if _, err := os.Stat(fl.path); err == nil && !opts.Force {
					fmt.Fprintf(f.IO.ErrOut, "kept    %s (exists)\n", rel)
					continue
				}
				if err := store.WriteFile(fl.path, []byte(fl.content), 0o644); err != nil {
					return err
				}
				fmt.Fprintf(f.IO.ErrOut, "wrote   %s\n", rel)
			}
			fmt.Fprintln(f.IO.ErrOut, "next: edit prd.json, `ralph prd validate`, then `ralph run`")
			return nil
		},
	}
	cmd.Flags().BoolVar(&opts.Force, "force", false, "overwrite existing files")
	return cmd
}

// gatesYAML is config.yaml's gates block (the task loop's gates) for what
// Detect found.
func gatesYAML(found gate.Found) string {
	if found.Empty() {
		return "# gates:                            # the task loop's gates (--tasks): name → command\n#   test: make test\n"
	}
	var b strings.Builder
	b.WriteString("# the task loop's gates (--tasks), found by ralph init; a PRD run uses prd.json's quality_checks\ngates:\n")
	for _, s := range gate.Slots {
		if c := found.Commands[s]; c != "" {
			fmt.Fprintf(&b, "  %s: %s\n", s, strconv.Quote(c))
		}
	}
	return b.String()
}
