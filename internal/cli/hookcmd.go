package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/ralph-loop/ralph/internal/hook"
	"github.com/ralph-loop/ralph/internal/proc"
	"github.com/ralph-loop/ralph/internal/usage"
)

// newCmdHook builds `ralph hook`.
func newCmdHook(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use: "hook",
		Example: `  ralph hook install --claude
  ralph hook uninstall --claude --scope user`,
		Short: "Drive the loop from inside Claude Code or Codex (Stop hook, plugin)",
		Long: `ralph can run inside an agent's own session: the agent's Stop hook calls
` + "`ralph hook stop`" + `, which decides whether the session may stop or gets the
next prompt. ` + "`ralph hook install`" + ` adds that hook to the agent's settings;
` + "`ralph hook plugin DIR`" + ` writes a Claude Code plugin with the hook and a
/ralph-loop command.

The hook command is the absolute path of this ralph binary (so it works
whatever PATH the agent has); pass --command to use another, e.g.
--command 'ralph hook stop' when ralph is on PATH. Install again after
moving the binary: the old entry is replaced, never duplicated.`,
	}
	cmd.AddCommand(newCmdHookStop(f, nil), newCmdHookInstall(f, nil), newCmdHookUninstall(f, nil), newCmdHookPlugin(f, nil))
	return cmd
}

// HookInstallOptions are `ralph hook install|uninstall`'s settings.
type HookInstallOptions struct {
	IO      *Factory
	Claude  bool
	Codex   bool
	Scope   string
	Command string
	Remove  bool
}

// newCmdHookInstall builds `ralph hook install`.
func newCmdHookInstall(f *Factory, runF func(*HookInstallOptions) error) *cobra.Command {
	opts := &HookInstallOptions{IO: f}
	cmd := &cobra.Command{
		Use: "install [--claude|--codex] [--scope project|user]",
		Example: `  ralph hook install --claude
  ralph hook install --codex --scope user`,
		Short: "Add ralph's Stop hook to Claude Code's or Codex's settings",
		Long: `Add {"hooks":{"Stop":[{"hooks":[{"type":"command","command":"<ralph> hook stop"}]}]}}
to the agent's settings, keeping every other key and hook:

  Claude Code  project: .claude/settings.json   user: ~/.claude/settings.json
  Codex        project: .codex/hooks.json       user: ~/.codex/hooks.json ($CODEX_HOME)

Running it twice changes nothing. A settings file that is not valid JSON is
an error naming file:line:col, and nothing is written. Codex runs a new or
changed hook only after you trust it (/hooks in the Codex TUI), and project
hooks only in a trusted project.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return hookInstall(cmd.Context(), opts)
		},
	}
	hookFlags(cmd, opts)
	return cmd
}

// newCmdHookUninstall builds `ralph hook uninstall`.
func newCmdHookUninstall(f *Factory, runF func(*HookInstallOptions) error) *cobra.Command {
	opts := &HookInstallOptions{IO: f, Remove: true}
	cmd := &cobra.Command{
		Use:     "uninstall [--claude|--codex] [--scope project|user]",
		Example: `  ralph hook uninstall --claude`,
		Short:   "Remove ralph's Stop hook (only ralph's) from the agent's settings",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return hookInstall(cmd.Context(), opts)
		},
	}
	hookFlags(cmd, opts)
	return cmd
}

func hookFlags(cmd *cobra.Command, o *HookInstallOptions) {
	fl := cmd.Flags()
	fl.BoolVar(&o.Claude, "claude", false, "Claude Code (the default)")
	fl.BoolVar(&o.Codex, "codex", false, "Codex")
	fl.StringVar(&o.Scope, "scope", hook.ScopeProject, "`SCOPE`: project (this repository) or user (your home folder)")
	fl.StringVar(&o.Command, "command", "", "the hook `COMMAND` (default: this binary's absolute path + ' hook stop')")
}

func hookCommand(cmd string) (string, error) {
	if cmd != "" {
		return cmd, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	if r, err := filepath.EvalSymlinks(exe); err == nil {
		exe = r
	}
	return hook.StopCommand(exe), nil
}

// configRoots are the folders an agent's configuration lives under: the
// project's (repository root) and, for the user scope, the home folder.
func configRoots(ctx context.Context, f *Factory, scope string) (root, home string, err error) {
	if root, _, err = pipelineBaseDir(ctx, f); err != nil {
		return "", "", err
	}
	home, err = os.UserHomeDir()
	if err != nil && scope != hook.ScopeUser {
		err = nil
	}
	return root, home, err
}

func hookInstall(ctx context.Context, o *HookInstallOptions) error {
	f := o.IO
	agents := []string{}
	if o.Claude || !o.Codex {
		agents = append(agents, hook.Claude)
	}
	if o.Codex {
		agents = append(agents, hook.Codex)
	}
	root, home, err := configRoots(ctx, f, o.Scope)
	if err != nil {
		return err
	}
	command, err := hookCommand(o.Command)
	if err != nil {
		return err
	}
	wd, _ := f.Getwd()
	for _, a := range agents {
		path, err := hook.SettingsPath(a, o.Scope, root, home)
		if err != nil {
			return usage.Errorf("%v", err)
		}
		var res hook.Result
		if o.Remove {
			res, err = hook.Uninstall(path, command)
		} else {
			res, err = hook.Install(path, command)
		}
		if err != nil {
			return err
		}
		shown := pipelineRel(wd, path)
		switch res.Action {
		case "added":
			fmt.Fprintf(f.IO.ErrOut, "added   Stop hook %q to %s\n", command, shown)
		case "updated":
			fmt.Fprintf(f.IO.ErrOut, "updated Stop hook to %q in %s\n", command, shown)
		case "unchanged":
			fmt.Fprintf(f.IO.ErrOut, "kept    %s (ralph's Stop hook is already there)\n", shown)
		case "removed":
			fmt.Fprintf(f.IO.ErrOut, "removed ralph's Stop hook from %s\n", shown)
		case "absent":
			fmt.Fprintf(f.IO.ErrOut, "kept    %s (no ralph Stop hook in it)\n", shown)
		}
		if a == hook.Codex && !o.Remove && res.Changed {
			fmt.Fprintln(f.IO.ErrOut, "note: Codex runs a new or changed hook only after you review and trust it (/hooks in Codex)")
		}
	}
	return nil
}

// HookPluginOptions are `ralph hook plugin`'s settings.
type HookPluginOptions struct {
	IO      *Factory
	Dir     string
	Command string
}

// newCmdHookPlugin builds `ralph hook plugin`.
func newCmdHookPlugin(f *Factory, runF func(*HookPluginOptions) error) *cobra.Command {
	opts := &HookPluginOptions{IO: f}
	cmd := &cobra.Command{
		Use:     "plugin DIR",
		Example: `  ralph hook plugin ./ralph-plugin`,
		Short:   "Write a Claude Code plugin (Stop hook + /ralph-loop command) into DIR",
		Long: `Write a Claude Code plugin folder:

  DIR/.claude-plugin/plugin.json   manifest (name ralph)
  DIR/hooks/hooks.json             Stop hook: <ralph> hook stop
  DIR/commands/ralph-loop.md       /ralph-loop PROMPT: runs <ralph> loop start "$ARGUMENTS"

<ralph> is this binary's absolute path unless --command names another
program (e.g. --command ralph when it is on PATH). Load it with
` + "`claude --plugin-dir DIR`" + ` or add it to a marketplace. Running it again
rewrites only files that changed.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Dir = args[0]
			if runF != nil {
				return runF(opts)
			}
			bin := opts.Command
			if bin == "" {
				exe, err := os.Executable()
				if err != nil {
					return err
				}
				if r, err := filepath.EvalSymlinks(exe); err == nil {
					exe = r
				}
				bin = exe
			}
			written, unchanged, err := hook.WritePlugin(opts.Dir, proc.Quote(bin), version)
			for _, n := range written {
				fmt.Fprintf(f.IO.ErrOut, "wrote   %s\n", filepath.Join(opts.Dir, n))
			}
			for _, n := range unchanged {
				fmt.Fprintf(f.IO.ErrOut, "kept    %s (unchanged)\n", filepath.Join(opts.Dir, n))
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(f.IO.ErrOut, "next: claude --plugin-dir %s\n", opts.Dir)
			return nil
		},
	}
	cmd.Flags().StringVar(&opts.Command, "command", "", "the ralph `PROGRAM` the hook and command run (default: this binary's absolute path)")
	return cmd
}
