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
reason: go.mod (go vet and go test; go build would compile the module a
third time for what those two check), package.json's scripts (test,
lint, typecheck or tsc, build; npm, pnpm, yarn or bun from the lock file),
pyproject.toml (pytest, ruff, mypy when it names them; install the project
first, e.g. pip install -e ., for its tests to import it), tox.ini (tox) or
noxfile.py (nox), which install the project themselves, Cargo.toml (cargo
check, clippy, test) and a Makefile's test, lint and check targets (which
win over a language's, unless their recipe runs a program from one
person's home, like ~/.virtualenvs/…/python). They become the example
PRD's quality_checks and the task loop's gates in config.yaml; run again
after the project gained one of those files (go mod init), init adds the
gates to a prd.json and config.yaml that have none yet and keeps the rest.
config.yaml's settings are commented out, so your own
~/.config/ralph/config.yaml applies until this repository sets one.`,
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
			case found.Empty() && len(found.Why) == 0 && hasGoFiles(root):
				fmt.Fprintf(f.IO.ErrOut, "found   Go files but no go.mod: `go mod init MODULE` (e.g. go mod init example.com/%s) makes this a module, then `ralph init` again finds its gates (go vet, go test)\n", filepath.Base(root))
			case found.Empty() && len(found.Why) == 0:
				fmt.Fprintf(f.IO.ErrOut, "found   no go.mod, package.json, pyproject.toml, tox.ini, noxfile.py, Cargo.toml or Makefile targets: prd.json has no quality_checks; add the commands that test your project (a story passes only on what they say)\n")
			case found.Empty():
				fmt.Fprintf(f.IO.ErrOut, "found   no command that tests the project: prd.json has no quality_checks; add them (a story passes only on what they say)\n")
			}
			doc := prd.Template(filepath.Base(root), "First feature")
			doc.QualityChecks = found.QualityChecks()
			tmpl, _ := doc.Marshal()
			files := []struct {
				path, content string
				// fill updates a kept file that has no gates yet with
				// the ones found: "" when there is nothing to change.
				fill func(old []byte) ([]byte, string)
			}{
				{filepath.Join(root, ".ralph", "config.yaml"), config.Template + gatesYAML(found), func(old []byte) ([]byte, string) { return fillConfigGates(old, found) }},
				{filepath.Join(root, ".ralph", "PROMPT.md"), engine.DefaultPrompt, nil},
				{filepath.Join(root, "prd.json"), string(tmpl), func(old []byte) ([]byte, string) { return fillPRDGates(old, found) }},
			}
			for _, fl := range files {
				rel, _ := filepath.Rel(root, fl.path)
				if old, err := os.ReadFile(fl.path); err == nil && !opts.Force {
					if fl.fill != nil {
						if b, what := fl.fill(old); what != "" {
							if err := store.WriteFile(fl.path, b, 0o644); err != nil {
								return err
							}
							fmt.Fprintf(f.IO.ErrOut, "updated %s (%s)\n", rel, what)
							continue
						}
					}
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

// hasGoFiles reports whether the project has Go source at its top or one
// folder down.
func hasGoFiles(root string) bool {
	for _, pat := range []string{"*.go", "*/*.go"} {
		if m, _ := filepath.Glob(filepath.Join(root, pat)); len(m) > 0 {
			return true
		}
	}
	return false
}

// fillPRDGates gives a PRD that has no quality gates the ones found (a
// prd.json `ralph init` wrote before the project had a go.mod, say):
// the file edited in place, every other byte kept. A PRD with gates of
// its own is the user's, and left alone.
func fillPRDGates(old []byte, found gate.Found) ([]byte, string) {
	doc, err := prd.Parse("prd.json", old)
	if err != nil || found.Empty() || doc.QualityChecks != (prd.QualityChecks{}) {
		return nil, ""
	}
	doc.QualityChecks = found.QualityChecks()
	b, err := doc.Marshal()
	if err != nil {
		return nil, ""
	}
	return b, "it had no quality_checks: added " + strings.Join(slotsOf(found), ", ")
}

// fillConfigGates replaces the commented-out gates example `ralph init`
// wrote when it found none with the gates it finds now.
func fillConfigGates(old []byte, found gate.Found) ([]byte, string) {
	none := gatesYAML(gate.Found{})
	if found.Empty() || !strings.Contains(string(old), none) {
		return nil, ""
	}
	return []byte(strings.Replace(string(old), none, gatesYAML(found), 1)), "the task loop's gates: " + strings.Join(slotsOf(found), ", ")
}

// slotsOf are the gate slots found, in order.
func slotsOf(found gate.Found) []string {
	var out []string
	for _, s := range gate.Slots {
		if found.Commands[s] != "" {
			out = append(out, s)
		}
	}
	return out
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
