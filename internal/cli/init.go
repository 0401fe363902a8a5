package cli

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/ralph-loop/ralph/internal/config"
	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/prd"
	"github.com/ralph-loop/ralph/internal/store"
)

// InitOptions are `ralph init`'s settings.
type InitOptions struct {
	IO    *Factory
	Force bool
}

// NewCmdInit builds `ralph init`.
func NewCmdInit(f *Factory, runF func(*InitOptions) error) *cobra.Command {
	opts := &InitOptions{IO: f}
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Scaffold .ralph/config.yaml, .ralph/PROMPT.md and an example prd.json",
		Long: `Write a starting configuration into the current repository: .ralph/config.yaml
(every key is also a run flag), .ralph/PROMPT.md (the built-in prompt, to
edit; it may use {{.ItemID}}, {{.Title}}, {{.PRDPath}}, {{.Promise}}, …) and
prd.json (a template) when there is none. Existing files are kept unless
--force. .ralph/ is listed in .git/info/exclude, never in your .gitignore.`,
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
			tmpl, _ := prd.Template(filepath.Base(root), "First feature").Marshal()
			files := []struct{ path, content string }{
				{filepath.Join(root, ".ralph", "config.yaml"), config.Template},
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
