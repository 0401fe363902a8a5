// Package cli is ralph's command tree. Each command is NewCmdX(f, runF)
// with an options struct; runF lets tests stop after flag parsing. Every
// error becomes an exit code in exitcode.go, nowhere else.
package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/ralph-loop/ralph/internal/config"
	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/git"
	"github.com/ralph-loop/ralph/internal/iostreams"
)

// Version is set at build time.
var Version = "0.1.0-dev"

// Factory carries what commands share.
type Factory struct {
	IO    *iostreams.IOStreams
	Getwd func() (string, error)
}

// RepoRoot finds the git top level of the working directory.
func (f *Factory) RepoRoot(ctx context.Context) (string, *git.Repo, error) {
	wd, err := f.Getwd()
	if err != nil {
		return "", nil, err
	}
	r := git.New(wd)
	top, err := r.Toplevel(ctx)
	if err != nil {
		return "", nil, engine.UsageError("%s is not inside a git repository (run `git init` and make a first commit)", wd)
	}
	return top, git.New(top), nil
}

// Config loads .ralph/config.yaml under root.
func (f *Factory) Config(root string) (*config.Config, error) {
	c, err := config.Load(filepath.Join(root, ".ralph", "config.yaml"))
	if err != nil {
		return nil, engine.UsageError("%v", err)
	}
	return c, nil
}

// NewCmdRoot builds the tree.
func NewCmdRoot(f *Factory) *cobra.Command {
	root := &cobra.Command{
		Use:   "ralph",
		Short: "Run AI coding agents in a verified Ralph loop",
		Long: `ralph runs a coding agent (Claude Code, Codex, opencode, Gemini CLI, amp,
its own native agent, or any command) in a Ralph loop: a fresh agent process
per iteration over a PRD, a task tree or a pipeline; quality gates run by the
harness after each iteration; git as memory; and a stop only when the work is
verifiably done.

Exit codes: 0 complete · 1 error · 2 usage or invalid input · 3 max iterations
or budget reached with work left · 4 blocked · 130 interrupted or stopped.`,
		Version:       Version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(f.IO.Out)
	root.SetErr(f.IO.ErrOut)
	root.SetIn(f.IO.In)
	root.AddCommand(
		NewCmdRun(f, nil),
		NewCmdStatus(f, nil),
		NewCmdPRD(f),
		NewCmdStop(f, nil),
		NewCmdDemo(f, nil),
		NewCmdInit(f, nil),
	)
	for _, add := range extraCommands {
		root.AddCommand(add(f))
	}
	return root
}

// extraCommands lets command files register themselves (keeps root.go
// stable while the tree grows).
var extraCommands []func(*Factory) *cobra.Command

// Main runs ralph with the process's arguments and returns the exit code.
func Main() int {
	f := &Factory{IO: iostreams.System(), Getwd: os.Getwd}
	return Run(f, os.Args[1:])
}

// Run executes args against f (tests call this directly).
func Run(f *Factory, args []string) int {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	cmd := NewCmdRoot(f)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(ctx)
	code := ExitCode(err)
	var se *statusError
	if err != nil && !errors.As(err, &se) {
		fmt.Fprintf(f.IO.ErrOut, "ralph: %v\n", err)
		if code == ExitUsage && isFlagError(err) {
			fmt.Fprintf(f.IO.ErrOut, "Run '%s --help' for usage.\n", cmd.CommandPath())
		}
	}
	return code
}
