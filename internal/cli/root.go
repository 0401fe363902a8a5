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
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/ralph-loop/ralph/internal/config"
	"github.com/ralph-loop/ralph/internal/gate"
	"github.com/ralph-loop/ralph/internal/git"
	"github.com/ralph-loop/ralph/internal/github"
	"github.com/ralph-loop/ralph/internal/iostreams"
	"github.com/ralph-loop/ralph/internal/proc"
	"github.com/ralph-loop/ralph/internal/sandbox"
	"github.com/ralph-loop/ralph/internal/usage"
)

// version is set at build time (-ldflags "-X …/internal/cli.version=v1.2.3",
// as make release does); when it is not, versionString reads the module
// version and the commit from the binary's build info.
var version = ""

// versionString is what `ralph --version` prints: the version (the
// module's, for a `go install`ed binary), then the commit and its time
// and whether the tree was modified, when the build recorded them.
func versionString() string {
	v := version
	bi, ok := debug.ReadBuildInfo()
	if v == "" {
		v = "(devel)"
		if ok && bi.Main.Version != "" {
			v = bi.Main.Version
		}
	}
	if !ok {
		return v
	}
	var rev, at, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = ", modified"
			}
		}
	}
	if rev != "" {
		v += fmt.Sprintf(" (commit %.12s, %s%s)", rev, at, dirty)
	}
	return v + " " + bi.GoVersion
}

// Factory carries what commands share: the streams, the working folder,
// and the process runner every git call and quality gate goes through.
// Commands take their repository and gate runner from here, never build
// them, so a test's runner sees every process a command would start.
// (Agents start their own processes: agent.New picks the runner.)
type Factory struct {
	IO     *iostreams.IOStreams
	Getwd  func() (string, error)
	Runner proc.Runner // nil: real processes (proc.Exec)
	// tops holds each working directory's repository top level: one
	// command asks for it several times, and each answer is a git process.
	tops sync.Map
}

func (f *Factory) runner() proc.Runner {
	if f.Runner == nil {
		return proc.Exec{}
	}
	return f.Runner
}

// gh is GitHub through the user's gh CLI, run in dir.
func (f *Factory) gh(dir string) *github.GH { return &github.GH{Runner: f.runner(), Dir: dir} }

// GitAt is the git repository (or worktree) at dir.
func (f *Factory) GitAt(dir string) *git.Repo { return &git.Repo{Dir: dir, Runner: f.runner()} }

// GateRunner runs quality gates with a time limit per gate (0: the
// default).
func (f *Factory) GateRunner(timeout time.Duration) gate.Runner {
	return gate.Runner{Proc: f.runner(), Timeout: timeout}
}

// Repo is the repository the working directory is in: its top level and
// the git runner there.
func (f *Factory) Repo(ctx context.Context) (root string, repo *git.Repo, err error) {
	wd, err := f.Getwd()
	if err != nil {
		return "", nil, err
	}
	if top, ok := f.tops.Load(wd); ok {
		return top.(string), f.GitAt(top.(string)), nil
	}
	top, err := f.GitAt(wd).Toplevel(ctx)
	if err != nil {
		return "", nil, usage.Errorf("%s is not inside a git repository (run `git init` and make a first commit)", wd)
	}
	f.tops.Store(wd, top)
	return top, f.GitAt(top), nil
}

// Config loads the settings of the repository at root: its
// .ralph/config.yaml over the user's config.
func (f *Factory) Config(root string) (*config.Config, error) {
	l, err := f.Settings(root)
	if err != nil {
		return nil, err
	}
	return l.Config, nil
}

// Settings is Config with where each setting came from.
func (f *Factory) Settings(root string) (*config.Layered, error) {
	l, err := config.LoadLayered(filepath.Join(root, ".ralph", "config.yaml"))
	if err != nil {
		return nil, usage.Errorf("%v", err)
	}
	return l, nil
}

// Command groups in `ralph --help`.
const (
	groupWork         = "work"
	groupFiles        = "files"
	groupIntegrations = "integrations"
)

// newCmdRoot builds the whole command tree: every command is listed here.
func newCmdRoot(f *Factory) *cobra.Command {
	root := &cobra.Command{
		Use:   "ralph",
		Short: "Run AI coding agents in a verified Ralph loop",
		Long: `ralph runs a coding agent (Claude Code, Codex, opencode, Gemini CLI, amp,
its own native agent, or any command) in a Ralph loop: a fresh agent process
per iteration over a PRD, a task tree or a pipeline; quality gates run by the
harness after each iteration; git as memory; and a stop only when the work is
verifiably done.

Exit codes: 0 complete · 1 error · 2 usage or invalid input · 3 max iterations
or budget reached with work left · 4 blocked · 5 awaiting plan approval ·
6 unverified (only items marked done by hand are left) · 130 interrupted or
stopped.`,
		Version:       versionString(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(f.IO.Out)
	root.SetErr(f.IO.ErrOut)
	root.SetIn(f.IO.In)
	root.AddGroup(
		&cobra.Group{ID: groupWork, Title: "Run and watch the loop:"},
		&cobra.Group{ID: groupFiles, Title: "Work files (PRDs, task trees, pipelines, roles):"},
		&cobra.Group{ID: groupIntegrations, Title: "Inside an agent's own session:"},
	)
	add := func(group string, cmds ...*cobra.Command) {
		for _, c := range cmds {
			c.GroupID = group
			root.AddCommand(c)
		}
	}
	add(groupWork, newCmdRun(f, nil), newCmdStatus(f, nil), newCmdWatch(f, nil), newCmdServe(f, nil), newCmdLog(f, nil), newCmdStop(f, nil), newCmdPause(f, false), newCmdPause(f, true), newCmdApprove(f, nil), newCmdReject(f, nil), newCmdAnswer(f, nil), newCmdGuide(f, nil), newCmdReview(f, nil), newCmdPlan(f, nil), newCmdRetry(f, nil), newCmdClean(f, nil), newCmdDemo(f, nil), newCmdInit(f, nil), newCmdDoctor(f, nil), newCmdConfig(f), newCmdCoordinator(f, nil), newCmdWorker(f, nil), newCmdCluster(f))
	add(groupFiles, newCmdPRD(f), newCmdCreatePRD(f), newCmdRuns(f, nil), newCmdTask(f), newCmdPipeline(f), newCmdRoles(f, nil))
	add(groupIntegrations, newCmdHook(f), newCmdLoop(f), newCmdMCP(f, nil), newCmdAsk(f, nil))
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return &commandLineError{err: err, cmd: c} })
	usageErrorsFromArgs(root)
	return root
}

// commandLineError is a command line that cannot run: an unknown flag or
// subcommand, a bad flag value, the wrong number of arguments. It is a
// usage error (exit 2) and knows the command whose --help explains.
type commandLineError struct {
	err error
	cmd *cobra.Command
}

func (e *commandLineError) Error() string { return e.err.Error() }
func (e *commandLineError) Unwrap() error { return e.err }

// usageErrorsFromArgs makes every command's argument check, and an unknown
// subcommand of a command that only groups others, a commandLineError.
// Cobra alone would answer `ralph task frob` with task's help and exit 0,
// and `ralph frob` with a plain error.
func usageErrorsFromArgs(c *cobra.Command) {
	if c.HasSubCommands() && c.Run == nil && c.RunE == nil {
		c.Args = cobra.ArbitraryArgs
		// Cobra's own default, which only its unknown-command path sets.
		c.SuggestionsMinimumDistance = 2
		c.RunE = func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
			if near := cmd.SuggestionsFor(args[0]); len(near) > 0 {
				msg += "; did you mean " + strings.Join(near, " or ") + "?"
			}
			return &commandLineError{err: errors.New(msg), cmd: cmd}
		}
	}
	if check := c.Args; check != nil {
		c.Args = func(cmd *cobra.Command, args []string) error {
			if err := check(cmd, args); err != nil {
				return &commandLineError{err: err, cmd: cmd}
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		usageErrorsFromArgs(sub)
	}
}

// requireFlags makes the named flags required: a command line without one
// is a commandLineError (cobra's own check would be a plain error).
func requireFlags(cmd *cobra.Command, names ...string) {
	next := cmd.PreRunE
	cmd.PreRunE = func(c *cobra.Command, args []string) error {
		var missing []string
		for _, n := range names {
			if !c.Flags().Changed(n) {
				missing = append(missing, "--"+n)
			}
		}
		switch len(missing) {
		case 0:
		case 1:
			return &commandLineError{err: fmt.Errorf("missing required flag %s", missing[0]), cmd: c}
		default:
			return &commandLineError{err: fmt.Errorf("missing required flags %s", strings.Join(missing, ", ")), cmd: c}
		}
		if next != nil {
			return next(c, args)
		}
		return nil
	}
}

// Main runs ralph with the process's arguments and returns the exit code.
func Main() int {
	// Started as the sandbox's init (see internal/sandbox): that, and exit.
	sandbox.RunInitIfAsked(os.Args)
	f := &Factory{IO: iostreams.System(), Getwd: os.Getwd}
	return run(f, os.Args[1:])
}

// run executes args against f (tests call this directly).
func run(f *Factory, args []string) int {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	cmd := newCmdRoot(f)
	cmd.SetArgs(args)
	_, err := cmd.ExecuteContextC(ctx)
	code := exitCode(err)
	var se *statusError
	var ee *exitError // its message was printed already
	if err != nil && !errors.As(err, &se) && !errors.As(err, &ee) {
		fmt.Fprintf(f.IO.ErrOut, "ralph: %v\n", err)
		var ce *commandLineError
		if errors.As(err, &ce) {
			fmt.Fprintf(f.IO.ErrOut, "Run '%s --help' for usage.\n", ce.cmd.CommandPath())
		}
	}
	return code
}
