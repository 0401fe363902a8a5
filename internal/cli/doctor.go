package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ralph-loop/ralph/internal/app"
	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/gate"
	"github.com/ralph-loop/ralph/internal/git"
	"github.com/ralph-loop/ralph/internal/sandbox"
	"github.com/ralph-loop/ralph/internal/usage"
)

// DoctorOptions are `ralph doctor`'s settings: a run's, whose flags it
// takes.
type DoctorOptions struct {
	Run *RunOptions
	// SkipGates leaves out running the gates on the base.
	SkipGates bool
}

// newCmdDoctor builds `ralph doctor`.
func newCmdDoctor(f *Factory, runF func(*DoctorOptions) error) *cobra.Command {
	opts := &DoctorOptions{Run: &RunOptions{IO: f}}
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check what a run needs: agent CLI and version, gate programs, git identity, clean tree",
		Long: `Run the preflight of ` + "`ralph run`" + ` and print every check, ok or not, each
failure with its fix: the agent's CLI is installed (and its version), or its
command, key or script is there; the summariser's too when it is another
agent; each gate's and story check's program resolves; git knows who
commits; the work tree holds no uncommitted change a new run would refuse
(the same rule ralph run starts by: the PRD and ralph's own files, like the
MCP config of ` + "`ralph mcp install`" + `, are fine; a run that resumes does not
look; --fresh and --allow-dirty check as that run would).
It then runs the run-wide gates on the base, in the sandbox, as the run's
baseline will (in a checkout of HEAD in a temp folder, removed after;
--skip-gates leaves it out): a gate that fails there is reported, and when
the sandbox is the cause (a path it kept read-only, a host it refused)
the report names it and the setting in your own config that allows it.
It also names the hosts the agent CLI's own configuration sends it to
(a Codex model provider's base_url, …) that the sandbox would refuse.
It reads the same flags and .ralph/config.yaml as ralph run. Exit 2 when a
check fails. It writes nothing in the work tree.`,
		Example: `  ralph doctor
  ralph doctor --agent codex --prd docs/prd.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Run.FlagSet = cmd.Flags().Changed
			if runF != nil {
				return runF(opts)
			}
			if err := opts.Run.applyConfig(cmd.Context()); err != nil {
				return err
			}
			return runDoctor(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	o := opts.Run
	registerAgentFlags(fl, &o.AgentSpec)
	fl.StringVar(&o.PRD, "prd", "", "PRD `FILE` whose gates to check (default prd.json in the repository root)")
	fl.StringVar(&o.Tasks, "tasks", "", "task tree `FILE` (with --gate)")
	fl.StringArrayVar(&o.Gates, "gate", nil, "with --tasks: gate `NAME=COMMAND` (repeatable)")
	fl.StringVar(&o.Summarizer, "summarizer", "", "the progress summariser's agent `NAME`")
	fl.StringVar(&o.SummarizerCmd, "summarizer-cmd", "", "for --summarizer cmd: its `ARGV`")
	fl.BoolVar(&o.NoSandbox, "no-sandbox", false, "check for a run without the sandbox")
	fl.BoolVar(&o.AllowDirty, "allow-dirty", false, "check for a run that may start on uncommitted changes")
	fl.BoolVar(&o.Fresh, "fresh", false, "check for a new run even when the last one would resume")
	fl.BoolVar(&opts.SkipGates, "skip-gates", false, "do not run the gates on the base")
	completeAgents(cmd, "agent", "summarizer")
	return cmd
}

func runDoctor(ctx context.Context, opts *DoctorOptions) error {
	o := opts.Run
	f := o.IO
	root, repo, err := f.Repo(ctx)
	if err != nil {
		return err
	}
	var checks []app.Check
	ags, err := o.RunAgents()
	if err != nil {
		checks = append(checks, app.Check{Name: "agent " + o.Agent, Err: err})
	}
	if rs, err := app.LoadRoles(root); err != nil {
		checks = append(checks, app.Check{Name: "roles", Err: err})
	} else if len(ags) > 0 {
		ags = append(ags, o.RoleAgents(root, rs, ags[0].Agent())...)
	}
	var commands []string
	src, serr := app.OpenSource(ctx, &o.Options, o.deps(), root, repo, f.GateRunner(0))
	switch {
	case serr != nil:
		checks = append(checks, app.Check{Name: "work source", Err: serr})
	default:
		info := src.Info()
		commands = info.Commands
		c := app.Check{Name: "quality gates", Found: fmt.Sprintf("%d command(s) in %s", len(commands), relOr(root, info.Path))}
		if !info.Gated {
			c.Err = fmt.Errorf("none: every %s would pass on the agent's word alone; add the commands that test your project (`ralph init` finds them), or run with --no-gates", info.ItemKind)
		}
		checks = append(checks, c)
	}
	checks = append(checks, app.Preflight(ctx, root, repo, ags, commands)...)
	checks = append(checks, o.sandboxCheck(root))
	checks = append(checks, o.CLIHostsChecks()...)
	if src != nil {
		checks = append(checks, o.TreeCheck(ctx, root, repo, src.Info()))
		if !opts.SkipGates {
			checks = append(checks, o.baseGatesChecks(ctx, root, repo, src)...)
		}
	}
	failed := 0
	for _, c := range checks {
		if c.Err != nil {
			// One line: the fix in it is a command to copy whole.
			failed++
			fmt.Fprintf(f.IO.Out, "FAIL  %s: %v\n", c.Name, c.Err)
			continue
		}
		lines := checkLines(c.Name+": "+c.Found, doctorWidth)
		fmt.Fprintf(f.IO.Out, "ok    %s\n", lines[0])
		for _, l := range lines[1:] {
			fmt.Fprintf(f.IO.Out, "        %s\n", l)
		}
	}
	if failed > 0 {
		return usage.Errorf("%d check(s) failed", failed)
	}
	fmt.Fprintln(f.IO.ErrOut, "ralph: ready to run")
	return nil
}

// doctorWidth is where doctor breaks a long finding (the sandbox's
// account runs to some hundred words).
const doctorWidth = 100

// checkLines breaks a check's text into lines of about width: each
// sentence on a line of its own, a long one wrapped between words.
func checkLines(text string, width int) []string {
	if len(text) <= width {
		return []string{text}
	}
	var out []string
	for _, sentence := range splitSentences(text) {
		line := ""
		for _, w := range strings.Fields(sentence) {
			if line != "" && len(line)+1+len(w) > width {
				out = append(out, line)
				line = "  " + w // a wrapped sentence goes on indented
				continue
			}
			if line == "" {
				line = w
			} else {
				line += " " + w
			}
		}
		if line != "" {
			out = append(out, line)
		}
	}
	return out
}

// splitSentences splits text after ". " followed by a capital letter.
func splitSentences(text string) []string {
	var out []string
	start := 0
	for i := 0; i+2 < len(text); i++ {
		if text[i] == '.' && text[i+1] == ' ' && text[i+2] >= 'A' && text[i+2] <= 'Z' {
			out = append(out, text[start:i+1])
			start = i + 2
		}
	}
	return append(out, text[start:])
}

// baseGatesChecks run the run-wide gates on the base in the sandbox, as
// the run's baseline will (each gate, also after one failed), and say
// for each whether it passes; the notes of what the sandbox refused a
// failing gate (a path, a host, with the setting that allows it) come
// first.
func (o *RunOptions) baseGatesChecks(ctx context.Context, root string, repo *git.Repo, src engine.Source) []app.Check {
	bg, ok := src.(interface {
		BaselineGates(context.Context) (string, []gate.Gate)
	})
	if !ok {
		return nil
	}
	rev, gates := bg.BaselineGates(ctx)
	if len(gates) == 0 {
		return nil
	}
	where := "in the sandbox"
	sb, err := app.OpenSandbox(o.SandboxConfig, o.NoSandbox, engine.PathsFor(root))
	switch {
	case err != nil:
		return nil // the sandbox check says why
	case sb == nil:
		where = "without the sandbox"
	default:
		defer sb.CloseGates()
	}
	fail := func(err error) []app.Check {
		return []app.Check{{Name: "gates on the base", Err: err}}
	}
	commit, err := repo.RevParse(ctx, rev)
	if err != nil || commit == "" {
		return []app.Check{{Name: "gates on the base", Found: "not run: the repository has no commit yet"}}
	}
	tmp, err := os.MkdirTemp("", "ralph-doctor-")
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(tmp)
	tree := filepath.Join(tmp, "base")
	if err := repo.WorktreeAddDetached(ctx, tree, commit); err != nil {
		return fail(fmt.Errorf("checking out the base %.8s: %w", commit, err))
	}
	defer func() {
		_ = repo.WorktreeRemove(context.WithoutCancel(ctx), tree)
		_ = repo.WorktreePrune(context.WithoutCancel(ctx))
	}()
	runner := app.ConfinedGates(o.IO.GateRunner(o.GateTimeout), sb)
	var out []app.Check
	for _, g := range gates {
		c := app.Check{Name: "gate " + g.Name + " on the base"}
		results, _ := runner.Run(ctx, tree, []gate.Gate{g}, io.Discard)
		switch {
		case len(results) == 0:
			c.Err = fmt.Errorf("did not run")
		case results[0].Passed:
			c.Found = fmt.Sprintf("passes %s (%s)", where, results[0].Duration.Round(time.Millisecond))
		default:
			c.Err = errors.New(gateFailure(results[0], where))
		}
		out = append(out, c)
	}
	return out
}

// gateFailure says how a gate failed on the base: what the sandbox
// refused it first, then its output's last lines.
func gateFailure(r gate.Result, where string) string {
	var notes, rest []string
	for _, line := range strings.Split(strings.TrimSpace(r.Output), "\n") {
		if strings.HasPrefix(line, sandbox.NotePrefix) {
			notes = append(notes, line)
		} else {
			rest = append(rest, line)
		}
	}
	rest = rest[max(0, len(rest)-15):]
	msg := fmt.Sprintf("fails %s (exit %d), as the run's baseline would", where, r.ExitCode)
	if len(notes) > 0 {
		msg += "; the sandbox is the cause:\n      " + strings.Join(notes, "\n      ")
	}
	return msg + "\n      " + strings.Join(rest, "\n      ")
}
