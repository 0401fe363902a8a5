package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ralph-loop/ralph/internal/app"
	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/gate"
	"github.com/ralph-loop/ralph/internal/hook"
	"github.com/ralph-loop/ralph/internal/policy"
	"github.com/ralph-loop/ralph/internal/sandbox"
	"github.com/ralph-loop/ralph/internal/store"
	"github.com/ralph-loop/ralph/internal/usage"
)

// LoopStartOptions are `ralph loop start`'s settings.
type LoopStartOptions struct {
	IO                   *Factory
	Prompt               string
	MaxIterations        int
	Promise              string
	Checks               []string
	PRD                  string
	Pipeline             string
	AllowFailingBaseline bool
	NoSandbox            bool
	// TrustMarks: a PRD's stories marked passes: true by hand count as
	// passed (--trust-marks, or trust_marks in the config).
	TrustMarks bool
}

// newCmdLoop builds `ralph loop`: with a FILE, the plain external loop
// (`ralph run --prompt FILE`); its subcommands arm an in-session loop.
func newCmdLoop(f *Factory) *cobra.Command {
	opts := &RunOptions{IO: f}
	cmd := &cobra.Command{
		Use: "loop [FILE]",
		Example: `  ralph loop PROMPT.md --max-iterations 50
  ralph loop PROMPT.md --gate test='go test ./...'
  ralph loop start 'Make the tests in ./calc pass' --max-iterations 10
  ralph loop cancel`,
		Short: "Run the plain loop over a prompt FILE, or arm/cancel an in-session loop",
		Long: `With FILE: the plain Ralph loop, ` + "`while :; do cat FILE | claude; done`" + ` with a
harness: a fresh agent gets FILE's text every iteration until its final message
has <promise>COMPLETE</promise> (--promise), --max-iterations, a stop file
(` + "`touch .stop`" + `, .ralph/stop, ` + "`ralph stop`" + `) or Ctrl-C. The --gate commands
(or gates: in .ralph/config.yaml) run after each iteration and the promise
counts only when they pass. ralph commits what each iteration left on the
current branch (--no-commit to keep it uncommitted). It is ` + "`ralph run --prompt FILE`" + `
and takes the same flags.

An in-session loop (` + "`ralph loop start`" + `) runs inside one Claude Code (or Codex)
session: each time the agent tries to stop, ` + "`ralph hook stop`" + ` verifies the
iteration with the same engine and state as ` + "`ralph run`" + ` and, unless the loop is
done, blocks the stop and hands the agent the next prompt. Install the hook once
with ` + "`ralph hook install`" + ` (or use ` + "`ralph hook plugin`" + `).`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			if len(args) > 1 {
				return usage.Errorf("give one prompt FILE (or a subcommand: start, cancel)")
			}
			opts.Prompt, opts.PlainLoop = args[0], true
			opts.FlagSet = cmd.Flags().Changed
			if err := opts.applyConfig(cmd.Context()); err != nil {
				return err
			}
			return runRun(cmd.Context(), opts)
		},
	}
	opts.register(cmd)
	cmd.AddCommand(newCmdLoopStart(f, nil), newCmdLoopCancel(f, nil))
	return cmd
}

// newCmdLoopStart builds `ralph loop start`.
func newCmdLoopStart(f *Factory, runF func(*LoopStartOptions) error) *cobra.Command {
	opts := &LoopStartOptions{IO: f}
	cmd := &cobra.Command{
		Use:   "start [PROMPT]",
		Short: "Arm a loop: the same PROMPT until the completion promise, or a PRD / pipeline",
		Long: `Arm a loop for the Stop hook and print the first prompt (the agent works on it
now). With PROMPT: the plain Ralph loop — the same prompt every iteration until
the agent's final message has <promise>TEXT</promise> (and the --check commands
pass) or --max-iterations. With --prd or --pipeline: the stories or stages of
that file, verified by the harness's gates and exit conditions.`,
		Example: `  ralph loop start "Fix the failing tests. Say <promise>DONE</promise> when green." --completion-promise DONE --max-iterations 10
  ralph loop start --prd prd.json
  ralph pipeline start pagent`,
		// The words of the prompt may come unquoted (the plugin's
		// /ralph-loop passes its arguments as typed, flags and all): they
		// are joined with spaces.
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				opts.Prompt = strings.Join(args, " ")
			}
			if runF != nil {
				return runF(opts)
			}
			return runLoopStart(cmd.Context(), opts)
		},
	}
	cmd.Flags().IntVar(&opts.MaxIterations, "max-iterations", 20, "stop the loop after `N` iterations")
	cmd.Flags().StringVar(&opts.Promise, "completion-promise", "COMPLETE", "the `TEXT` the agent prints as <promise>TEXT</promise> when done")
	cmd.Flags().StringArrayVar(&opts.Checks, "check", nil, "with PROMPT: a `COMMAND` (run with sh -c) that must pass before the promise counts (repeatable)")
	cmd.Flags().StringVar(&opts.PRD, "prd", "", "loop over the stories of this PRD `FILE` instead of a prompt")
	cmd.Flags().StringVar(&opts.Pipeline, "pipeline", "", "loop over the stages of this pipeline (a `FILE`, or pagent)")
	cmd.Flags().BoolVar(&opts.AllowFailingBaseline, "allow-failing-baseline", false, "no longer needed: a base whose gates fail is work (never blamed on a story)")
	_ = cmd.Flags().MarkHidden("allow-failing-baseline")
	cmd.Flags().BoolVar(&opts.NoSandbox, "no-sandbox", false, "run the loop's gates and checks without the sandbox (bubblewrap)")
	cmd.Flags().BoolVar(&opts.TrustMarks, "trust-marks", false, "with --prd: count stories marked passes: true by hand as passed though no commit of ralph's records them (by default such a story is marked by hand, not verified: never counted as passed, and worked on like any other; also trust_marks: true in the config)")
	return cmd
}

// newCmdPipelineStart builds `ralph pipeline start`.
func newCmdPipelineStart(f *Factory, runF func(*LoopStartOptions) error) *cobra.Command {
	opts := &LoopStartOptions{IO: f}
	cmd := &cobra.Command{
		Use: "start [FILE|pagent]",
		Example: `  ralph pipeline start pagent
  ralph pipeline start pipeline.yaml`,
		Short: "Arm a pipeline for the Stop hook (in-session) and print the first stage's prompt",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Pipeline = ".ralph/pipeline.yaml"
			if len(args) == 1 {
				opts.Pipeline = args[0]
			}
			if runF != nil {
				return runF(opts)
			}
			return runLoopStart(cmd.Context(), opts)
		},
	}
	cmd.Flags().IntVar(&opts.MaxIterations, "max-iterations", 50, "stop the pipeline after `N` iterations in all")
	cmd.Flags().BoolVar(&opts.NoSandbox, "no-sandbox", false, "run the pipeline's gates and conditions without the sandbox (bubblewrap)")
	return cmd
}

func runLoopStart(ctx context.Context, o *LoopStartOptions) error {
	if o.AllowFailingBaseline {
		fmt.Fprintln(o.IO.IO.ErrOut, noFailingBaselineFlag)
	}
	root, repo, err := o.IO.Repo(ctx)
	if err != nil {
		return err
	}
	a := &hook.Armed{Promise: o.Promise, MaxIterations: o.MaxIterations, Checks: o.Checks, ArmedAt: time.Now().UTC(), NoSandbox: o.NoSandbox, TrustMarks: o.TrustMarks}
	if l, err := o.IO.Settings(root); err == nil && l.Config.TrustMarks {
		a.TrustMarks = true
	}
	switch {
	case o.PRD != "" && o.Pipeline != "" || (o.Prompt != "" && (o.PRD != "" || o.Pipeline != "")):
		return usage.Errorf("give one of PROMPT, --prd, --pipeline")
	case o.PRD != "":
		a.Kind, a.Path = "prd", absFrom(o.IO, o.PRD)
	case o.Pipeline != "":
		a.Kind, a.Path = "pipeline", o.Pipeline
		if o.Pipeline != "pagent" {
			a.Path = absFrom(o.IO, o.Pipeline)
		}
	case o.Prompt != "":
		a.Kind = "loop"
		a.Prompt = o.Prompt
	default:
		return usage.Errorf("give the loop's PROMPT, or --prd FILE, or --pipeline FILE")
	}
	if a.MaxIterations < 1 {
		return usage.Errorf("--max-iterations must be at least 1")
	}
	if old, _ := hook.LoadArmed(root); old != nil {
		return usage.Errorf("%s is already armed in %s (since %s); `ralph loop cancel` first", loopName("a", old.Kind), root, old.ArmedAt.Format(time.RFC3339))
	}
	// The gates run in the sandbox, or the loop is refused before
	// anything is written.
	gates, sb, err := loopGates(o.IO, root, a, 0)
	if err != nil {
		return err
	}
	// The loop's state lives in .ralph/: never in the user's commits.
	if err := repo.EnsureExcluded(ctx, "/.ralph/"); err != nil {
		return err
	}
	eng, err := app.HookEngine(ctx, root, repo, a, gates, sb, true, o.IO.IO.ErrOut)
	if err != nil {
		return err
	}
	res, err := eng.Start(ctx)
	if err != nil {
		return err
	}
	if res.Done {
		fmt.Fprintf(o.IO.IO.ErrOut, "ralph: nothing to do: %s\n", res.Reason)
		if res.Status == engine.StatusUnverified {
			// Nothing to run is not "done" over marks nobody verified.
			return &statusError{status: res.Status, reason: res.Reason}
		}
		return nil
	}
	if err := a.Save(root); err != nil {
		return err
	}
	fmt.Fprintf(o.IO.IO.ErrOut, "ralph: %s armed (iteration %d/%d, promise %q). The Stop hook continues it; `ralph loop cancel` disarms it.\n",
		loopName("", a.Kind), res.Iteration, res.MaxIterations, a.Promise)
	fmt.Fprintln(o.IO.IO.Out, res.Prompt)
	return nil
}

// absFrom is p made absolute against the Factory's working directory (the
// process's own may differ in tests).
func absFrom(f *Factory, p string) string { return app.Abs(f.Getwd, p) }

// newCmdLoopCancel builds `ralph loop cancel`.
func newCmdLoopCancel(f *Factory, runF func(*LoopCancelOptions) error) *cobra.Command {
	opts := &LoopCancelOptions{IO: f}
	return &cobra.Command{
		Use:     "cancel",
		Example: `  ralph loop cancel`,
		Short:   "Disarm the in-session loop: the next stop is allowed",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return runLoopCancel(cmd.Context(), opts)
		},
	}
}

// LoopCancelOptions are `ralph loop cancel`'s settings.
type LoopCancelOptions struct {
	IO *Factory
}

func runLoopCancel(ctx context.Context, o *LoopCancelOptions) error {
	f := o.IO
	root, _, err := f.Repo(ctx)
	if err != nil {
		return err
	}
	a, err := hook.LoadArmed(root)
	if err != nil {
		return err
	}
	if a == nil {
		fmt.Fprintln(f.IO.ErrOut, "ralph: no loop is armed")
		return nil
	}
	if err := hook.Disarm(root); err != nil {
		return err
	}
	_ = store.AppendJSONL(engine.PathsFor(root).Events, engine.Event{Time: time.Now().UTC(), Type: "loop_cancelled", Message: "ralph loop cancel"})
	fmt.Fprintf(f.IO.ErrOut, "ralph: %s disarmed; the state stays in .ralph/ (`ralph run` can continue a PRD or pipeline)\n", loopName("", a.Kind))
	return nil
}

// HookStopOptions are `ralph hook stop`'s settings.
type HookStopOptions struct {
	IO      *Factory
	Timeout time.Duration
}

// newCmdHookStop builds `ralph hook stop`.
func newCmdHookStop(f *Factory, runF func(*HookStopOptions) error) *cobra.Command {
	opts := &HookStopOptions{IO: f}
	cmd := &cobra.Command{
		Use: "stop",
		Example: `  # called by the Stop hook ralph hook install writes:
  ralph hook stop < hook-input.json`,
		Short: "The Stop hook: verify the iteration, then block with the next prompt or allow the stop",
		Long: `Called by Claude Code or Codex when the agent tries to stop, with the hook JSON
on stdin. With no armed loop, or a stop in another session, it allows the stop
(exit 0, no output). Otherwise it runs the gates / exit condition on the
iteration that just ended (promise read from last_assistant_message, never the
transcript file) and either allows the stop (the loop is done or a limit was
reached) or prints {"decision":"block","reason":NEXT_PROMPT,...}. Malformed
input never traps you: the stop is allowed and the error goes to
.ralph/events.jsonl.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return runHookStop(cmd.Context(), opts)
		},
	}
	cmd.Flags().DurationVar(&opts.Timeout, "timeout", 9*time.Minute, "time limit (`DURATION`) for the hook's own work (gates included); keep it under the hook timeout in your settings")
	return cmd
}

func runHookStop(ctx context.Context, o *HookStopOptions) error {
	f := o.IO
	in, inErr := hook.ReadInput(f.IO.In)
	wd := in.Cwd
	if wd == "" {
		wd, _ = f.Getwd()
	}
	top, err := f.GitAt(wd).Toplevel(ctx)
	if err != nil {
		// Not a repository: nothing of ours here. Said on stderr (shown in
		// the agent's hook log, never to the model) for diagnosis.
		fmt.Fprintf(f.IO.ErrOut, "ralph hook stop: %s is not in a git repository; stop allowed\n", wd)
		return nil
	}
	events := engine.PathsFor(top).Events
	logEvent := func(typ, msg string) {
		if _, err := os.Stat(filepath.Dir(events)); err == nil {
			_ = store.AppendJSONL(events, engine.Event{Time: time.Now().UTC(), Type: typ, Message: msg})
		}
	}
	if inErr != nil {
		logEvent("hook_error", "stop allowed: "+inErr.Error())
		return nil
	}
	a, err := hook.LoadArmed(top)
	if err != nil {
		logEvent("hook_error", "stop allowed: "+err.Error())
		return nil
	}
	if a == nil {
		return nil
	}
	logEvent("hook_called", fmt.Sprintf("Stop hook from session %s (stop_hook_active %v)", in.SessionID, in.StopHookActive))
	mine, adopted := a.Scope(in.SessionID)
	if !mine {
		logEvent("hook_other_session", fmt.Sprintf("stop of session %s allowed: the loop belongs to session %s", in.SessionID, a.SessionID))
		return nil
	}
	if adopted {
		logEvent("hook_session_adopted", fmt.Sprintf("session %s continues the loop after Claude's block limit", in.SessionID))
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	gates, sb, err := loopGates(f, top, a, o.Timeout)
	if err != nil {
		logEvent("hook_error", "stop allowed: "+err.Error())
		return nil
	}
	eng, err := app.HookEngine(ctx, top, f.GitAt(top), a, gates, sb, false, f.IO.ErrOut)
	var untrusted *policy.UntrustedError
	if errors.As(err, &untrusted) {
		// The loop is not over, and cannot be judged: it holds (the stop
		// is blocked) and says why, rather than ending unseen.
		logEvent("hook_held", "stop blocked, nothing judged: "+err.Error())
		a.Blocked(in.StopHookActive)
		_ = a.Save(top)
		return json.NewEncoder(f.IO.Out).Encode(hook.Decision{Decision: "block",
			Reason:        "ralph cannot judge this iteration of the loop: " + err.Error() + ". Do not change any file to get around this. Stop working and tell the user exactly this: the policy `ralph loop start` pinned was not found where this Stop hook looks (its HOME or XDG_STATE_HOME may differ from the session that started the loop). They can start the loop again (`ralph loop cancel`, then `ralph loop start`).",
			SystemMessage: "ralph: the loop is held, not ended: " + untrusted.Msg})
	}
	if err != nil {
		logEvent("hook_error", "stop allowed: "+err.Error())
		return nil
	}
	res, err := eng.Step(ctx, in.LastAssistantMessage)
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("the hook's time limit (%s) ran out while verifying: %w", o.Timeout, err)
		}
		logEvent("hook_error", "stop allowed: "+err.Error())
		_ = a.Save(top)
		return nil
	}
	if res.Done {
		_ = hook.Disarm(top)
		return nil
	}
	a.Blocked(in.StopHookActive)
	if err := a.Save(top); err != nil {
		logEvent("hook_error", "stop allowed: "+err.Error())
		return nil
	}
	where := ""
	if res.Item != nil {
		where = ", " + res.Item.Label()
	}
	msg := fmt.Sprintf("ralph: iteration %s%s", engine.IterationOf(res.Iteration, res.MaxIterations), where)
	if res.Verdict != nil && res.Verdict.Summary != "" {
		msg += " (last: " + res.Verdict.Summary + ")"
	}
	return json.NewEncoder(f.IO.Out).Encode(hook.Decision{Decision: "block", Reason: res.Prompt, SystemMessage: msg})
}

// loopName names an armed loop by its kind for messages: "loop" for a
// plain prompt loop, "PRD loop", "pipeline loop"; article "a" prefixes it.
func loopName(article, kind string) string {
	name := "loop"
	switch kind {
	case "", "loop":
	case "prd":
		name = "PRD loop"
	default:
		name = kind + " loop"
	}
	if article != "" {
		name = article + " " + name
	}
	return name
}

// loopGates is the gate runner of an in-session loop: in the sandbox
// unless the loop was armed with --no-sandbox.
func loopGates(f *Factory, root string, a *hook.Armed, timeout time.Duration) (gate.Runner, *sandbox.Sandbox, error) {
	gates := f.GateRunner(timeout)
	l, err := f.Settings(root)
	if err != nil {
		return gates, nil, err
	}
	return app.LoopGates(gates, l, root, a.NoSandbox)
}
