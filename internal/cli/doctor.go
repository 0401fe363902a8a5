package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ralph-loop/ralph/internal/agent"
	"github.com/ralph-loop/ralph/internal/app"
	"github.com/ralph-loop/ralph/internal/config"
	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/gate"
	"github.com/ralph-loop/ralph/internal/git"
	"github.com/ralph-loop/ralph/internal/hook"
	"github.com/ralph-loop/ralph/internal/roles"
	"github.com/ralph-loop/ralph/internal/sandbox"
	"github.com/ralph-loop/ralph/internal/usage"
)

// preflightCheck is one thing a run needs: what was looked at, what was
// found, or what is wrong with the fix in the message.
type preflightCheck struct {
	Name  string
	Found string
	Err   error
}

// preflight checks, before a run writes anything, what it will need: the
// agent can start (its CLI installed, and which version; its command, key
// or script), every gate's program resolves, and git knows who commits.
// `ralph doctor` prints the same checks, and more.
func preflight(ctx context.Context, root string, repo *git.Repo, ags []namedAgent, commands []string) []preflightCheck {
	var out []preflightCheck
	for _, a := range ags {
		c, ok := a.agent.(agent.Checker)
		if !ok || a.same {
			continue
		}
		found, err := c.Check(ctx, a.model)
		out = append(out, preflightCheck{Name: a.what, Found: found, Err: err})
	}
	for _, p := range gate.Programs(commands) {
		path, err := agent.LookProgram(p, root)
		out = append(out, preflightCheck{Name: "gate program " + p, Found: path, Err: err})
	}
	id, err := repo.Identity(ctx)
	if err != nil {
		err = fmt.Errorf("git does not know who commits (ralph's commits would be by ralph <ralph@localhost>): git config --global user.name \"Your Name\" && git config --global user.email you@example.com")
	}
	out = append(out, preflightCheck{Name: "git identity", Found: id, Err: err})
	return out
}

// namedAgent is an agent a run will start, for the preflight.
type namedAgent struct {
	what  string // "agent claude", "summarizer native"
	agent agent.Agent
	model string
	same  bool // the run's own agent again: checked once
}

// roleAgents are the agents roles.yaml names for its roles (agents:),
// when they are not the run's own: the preflight checks them too. A
// setting that cannot be built is a check that fails.
func (o *RunOptions) roleAgents(rs *roles.Set, run agent.Agent) []namedAgent {
	if rs == nil {
		return nil
	}
	choose := o.agentChooser(rs, run)
	var out []namedAgent
	for _, role := range slices.Sorted(maps.Keys(rs.Agents)) {
		c, err := choose(nil, role)
		what := "role " + role + " agent"
		if err != nil {
			out = append(out, namedAgent{what: what, agent: failedAgent{err}})
			continue
		}
		if c.Agent != nil && c.Agent != run {
			out = append(out, namedAgent{what: what + " " + c.Name, agent: c.Agent, model: c.Model})
		}
	}
	return out
}

// failedAgent is an agent setting that could not be built: its check
// says why.
type failedAgent struct{ err error }

func (f failedAgent) Name() string                                 { return "" }
func (f failedAgent) Plan(agent.Request) (agent.Invocation, error) { return agent.Invocation{}, f.err }
func (f failedAgent) Run(context.Context, agent.Request) (agent.Result, error) {
	return agent.Result{}, f.err
}
func (f failedAgent) Check(context.Context, string) (string, error) { return "", f.err }

// preflightError is the usage error of a failed preflight: one line per
// problem, with its fix.
func preflightError(checks []preflightCheck) error {
	var lines []string
	for _, c := range checks {
		if c.Err != nil {
			lines = append(lines, "  "+c.Name+": "+c.Err.Error())
		}
	}
	if len(lines) == 0 {
		return nil
	}
	return usage.Errorf("preflight: %d problem(s), nothing was started:\n%s\n(`ralph doctor` runs every check)", len(lines), strings.Join(lines, "\n"))
}

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
			opts.Run.flagSet = cmd.Flags().Changed
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
	o.AgentFlags.register(fl)
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
	var checks []preflightCheck
	ags, err := o.runAgents()
	if err != nil {
		checks = append(checks, preflightCheck{Name: "agent " + o.Agent, Err: err})
	}
	if rs, err := app.LoadRoles(root); err != nil {
		checks = append(checks, preflightCheck{Name: "roles", Err: err})
	} else if len(ags) > 0 {
		ags = append(ags, o.roleAgents(rs, ags[0].agent)...)
	}
	var commands []string
	src, serr := o.openSource(ctx, root, repo, f.GateRunner(0))
	switch {
	case serr != nil:
		checks = append(checks, preflightCheck{Name: "work source", Err: serr})
	default:
		info := src.Info()
		commands = info.Commands
		c := preflightCheck{Name: "quality gates", Found: fmt.Sprintf("%d command(s) in %s", len(commands), relOr(root, info.Path))}
		if !info.Gated {
			c.Err = fmt.Errorf("none: every %s would pass on the agent's word alone; add the commands that test your project (`ralph init` finds them), or run with --no-gates", info.ItemKind)
		}
		checks = append(checks, c)
	}
	checks = append(checks, preflight(ctx, root, repo, ags, commands)...)
	checks = append(checks, o.sandboxCheck(root))
	checks = append(checks, o.cliHostsChecks()...)
	if src != nil {
		checks = append(checks, o.treeCheck(ctx, root, repo, src.Info()))
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

// runAgents are the agents a run starts up front: its own, then the
// progress summariser (the run's own agent, or another).
func (o *RunOptions) runAgents() ([]namedAgent, error) {
	ag, err := o.AgentFlags.build()
	if err != nil {
		return nil, err
	}
	ags := []namedAgent{{what: "agent " + o.Agent, agent: ag, model: o.Model}}
	sum, model, err := o.summarizer(ag)
	if err != nil {
		return ags, err
	}
	what := "summarizer " + o.Summarizer
	if o.Summarizer == "" {
		what = "summarizer (the run's agent)"
	}
	return append(ags, namedAgent{what: what, agent: sum, model: model, same: sum == ag}), nil
}

// treeCheck is the verdict a new run gives the work tree
// (engine.CheckStartTree), or why a run would not look at it: a resume
// keeps the tree its run left.
func (o *RunOptions) treeCheck(ctx context.Context, root string, repo *git.Repo, info engine.SourceInfo) preflightCheck {
	c := preflightCheck{Name: "work tree"}
	p := engine.PathsFor(root)
	if saved, _, err := engine.LoadOrRebuildState(p); err == nil && saved != nil && !o.Fresh &&
		saved.Source == info.Kind && saved.SourcePath == info.Path && saved.Status != engine.StatusComplete {
		c.Found = fmt.Sprintf("not checked: the next `ralph run` resumes run %s (`ralph run --fresh` would check it)", saved.RunID)
		return c
	}
	tree, err := engine.CheckStartTree(ctx, repo, root, info, setupFiles())
	switch {
	case err != nil:
		c.Err = err
	case o.AllowDirty:
		c.Found = fmt.Sprintf("%d uncommitted change(s), allowed (--allow-dirty)", len(tree.Refused))
	default:
		c.Err = tree.Err()
		c.Found = "clean"
		if len(tree.Kept) > 0 {
			c.Found = fmt.Sprintf("clean but for ralph's own %s (never committed by a run)", strings.Join(tree.Kept, ", "))
		}
	}
	return c
}

// setupFiles are the files ralph's own commands write into a repository
// that a new run accepts uncommitted (engine.StartConfig.Setup).
func setupFiles() []string { return hook.ProjectMCPFiles() }

// cliHostsChecks name the hosts the agent CLI's own configuration sends
// it to (when ralph gives it no base URL): each must be allowed in the
// user's config, or every iteration would end at a 403 from ralph's
// proxy, an attempt spent each time.
func (o *RunOptions) cliHostsChecks() []preflightCheck {
	if o.NoSandbox || (o.sandboxCfg.Enabled != nil && !*o.sandboxCfg.Enabled) || o.sandboxCfg.Network == sandbox.NetHost ||
		o.BaseURL != "" || os.Getenv("RALPH_"+strings.ToUpper(o.Agent)+"_BASE_URL") != "" {
		return nil
	}
	allowed := append(slices.Clone(o.sandboxCfg.AllowHosts), app.AgentHosts(o.Agent, o.BaseURL, o.Env)...)
	var out []preflightCheck
	for _, h := range sandbox.CLIHosts(o.Agent) {
		c := preflightCheck{Name: "agent " + o.Agent + "'s own endpoint"}
		name, _, _ := strings.Cut(h.Host, ":")
		if sandbox.Allowed(allowed, h.Host) {
			c.Found = fmt.Sprintf("%s, set in %s, allowed", h.Host, h.From)
		} else {
			c.Err = fmt.Errorf("%s sends %s to %s, which the sandbox does not allow: every iteration would fail at ralph's proxy; if you trust it, allow it once with `allow_hosts: [%s]` under `sandbox:` in %s",
				h.From, o.Agent, h.Host, name, config.UserPath())
		}
		out = append(out, c)
	}
	return out
}

// baseGatesChecks run the run-wide gates on the base in the sandbox, as
// the run's baseline will (each gate, also after one failed), and say
// for each whether it passes; the notes of what the sandbox refused a
// failing gate (a path, a host, with the setting that allows it) come
// first.
func (o *RunOptions) baseGatesChecks(ctx context.Context, root string, repo *git.Repo, src engine.Source) []preflightCheck {
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
	sb, err := app.OpenSandbox(o.sandboxCfg, o.NoSandbox, engine.PathsFor(root))
	switch {
	case err != nil:
		return nil // the sandbox check says why
	case sb == nil:
		where = "without the sandbox"
	default:
		defer sb.CloseGates()
	}
	fail := func(err error) []preflightCheck {
		return []preflightCheck{{Name: "gates on the base", Err: err}}
	}
	commit, err := repo.RevParse(ctx, rev)
	if err != nil || commit == "" {
		return []preflightCheck{{Name: "gates on the base", Found: "not run: the repository has no commit yet"}}
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
	var out []preflightCheck
	for _, g := range gates {
		c := preflightCheck{Name: "gate " + g.Name + " on the base"}
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
