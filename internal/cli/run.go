package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ralph-loop/ralph/internal/agent"
	"github.com/ralph-loop/ralph/internal/app"
	"github.com/ralph-loop/ralph/internal/config"
	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/proc"
	"github.com/ralph-loop/ralph/internal/sandbox"
	"github.com/ralph-loop/ralph/internal/usage"
)

// RunOptions are `ralph run`'s settings: the run's own (app.Options,
// which the flags and the config fill) and the command's.
type RunOptions struct {
	IO *Factory
	app.Options
	// coord is set by `ralph coordinator`: the agent runs on workers.
	coord *coordinatorFlags
	// root and sandbox are ralph review's: the repository, and the
	// sandbox its reviewers run in.
	root    string
	sandbox *sandbox.Sandbox
}

// flagSet reports whether a flag was given on the command line (flags
// win over the config file).
func (o *RunOptions) flagSet(name string) bool { return o.FlagSet != nil && o.FlagSet(name) }

// newCmdRun builds `ralph run`.
func newCmdRun(f *Factory, runF func(*RunOptions) error) *cobra.Command {
	opts := &RunOptions{IO: f}
	cmd := &cobra.Command{
		Use:   "run [RUN_DIR]",
		Short: "Run the loop over a PRD, a task tree or a pipeline",
		Long: `Run the Ralph loop: pick the next ready story, run a fresh agent on it,
run the quality gates yourself, commit it when they pass, retry with the
failure in the prompt when they do not, and stop when everything passed or a
limit is reached. State lives in .ralph/ (state.json, events.jsonl,
progress.md, transcripts/); run again after a crash and it resumes.

RUN_DIR is a run folder (ralph/runs/<id>/, made by ` + "`ralph runs new`" + `): the
loop reads prd.json and PROMPT.md there and writes its transcripts to
RUN_DIR/transcripts/ (kept out of git). It first checks the folder is
Ralph-ready (` + "`ralph runs lint`" + `) and refuses one that is not, unless --no-lint.

Stop gracefully with ` + "`ralph stop`" + ` (or create .ralph/stop): the current iteration
finishes first. Ctrl-C stops at once; the state is kept for a resume.`,
		Example: `  ralph run --prd prd.json --agent claude
  ralph run --prd prd.json --agent cmd --agent-cmd 'python3 my_agent.py'
  ralph run --prd prd.json --agent scripted --script demo-script.yaml
  ralph run --dry-run --agent codex`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				opts.RunDir = args[0]
			}
			opts.FlagSet = cmd.Flags().Changed
			if runF != nil {
				return runF(opts)
			}
			if err := opts.applyConfig(cmd.Context()); err != nil {
				return err
			}
			return runRun(cmd.Context(), opts)
		},
	}
	opts.register(cmd)
	cmd.ValidArgsFunction = completeRunFolders(f, false)
	return cmd
}

// register puts `ralph run`'s flags on cmd (ralph run, ralph loop FILE).
func (opts *RunOptions) register(cmd *cobra.Command) {
	// A backticked word in a usage string is the flag's value name in
	// --help (pflag's rule): every value flag names its own.
	fl := cmd.Flags()
	fl.StringVar(&opts.PRD, "prd", "", "PRD `FILE` (default prd.json in the repository root)")
	fl.StringVar(&opts.Tasks, "tasks", "", "task tree `FILE` (tasks.jsonl): one branch task/<id>-<slug> per leaf task, squash-merged when done")
	fl.StringVar(&opts.Issues, "issues", "", "GitHub search `QUERY` (e.g. label:ralph): each open issue it matches is a story, through your gh login (see docs/github.md)")
	fl.BoolVar(&opts.CloseIssues, "close-issues", false, "with --issues: close an issue once it passed (by default ralph only comments)")
	fl.StringVar(&opts.Plan, "plan", "", "markdown plan `FILE`: `### Task N: title` sections with `- [ ]` boxes, or a flat `- [ ]` checklist; ralph ticks the boxes as items pass (see docs/plans.md)")
	fl.StringVar(&opts.PlanCompleted, "plan-completed", "completed", "with --plan: the `DIR` (beside the plan unless absolute) a finished plan moves to; - keeps it in place")
	fl.BoolVar(&opts.PR, "pr", false, "push the feature branch and open or update its pull request with gh when the run ends (a draft until every item passed)")
	fl.StringVar(&opts.PRRemote, "pr-remote", "origin", "with --pr: the git `REMOTE` the feature branch is pushed to")
	fl.StringVar(&opts.Pipeline, "pipeline", "", "pipeline `FILE` (stages with exit conditions; see ralph pipeline --help), or a built-in pipeline name: pagent")
	registerAgentFlags(fl, &opts.AgentSpec)
	fl.StringVar(&opts.Prompt, "prompt", "", "prompt template `FILE` (default .ralph/PROMPT.md, then PROMPT.md, then built-in); with no PRD (nor --tasks, --pipeline, RUN_DIR) the plain loop: this prompt, as is, every iteration until the promise")
	fl.BoolVar(&opts.NoCommit, "no-commit", false, "plain loop (--prompt without a PRD): leave each iteration's work uncommitted (by default ralph commits it on the current branch)")
	fl.DurationVar(&opts.ErrorWait, "error-wait", app.DefaultErrorWait, "plain loop: wait this `DURATION` after an agent exits non-zero before the next iteration (as ralph.sh; 0 = no wait)")
	fl.StringVar(&opts.Promise, "promise", "", "completion promise `TEXT` the agent prints as <promise>TEXT</promise> (default COMPLETE)")
	fl.IntVar(&opts.MaxIterations, "max-iterations", 0, "stop after `N` iterations (default 10 × stories)")
	fl.IntVar(&opts.MaxAttempts, "max-attempts", 0, "`N` failed attempts per story before it is blocked (default 3): a claim of done that fails the gates or a review, or an iteration that changed nothing")
	fl.IntVar(&opts.MaxItemIterations, "max-item-iterations", 0, "`N` iterations per story before it is blocked, work in progress included (default 10): iterations that commit or change files without claiming done spend no attempt")
	fl.IntVar(&opts.TestFix, "test-fix", 0, "when a claim fails the gate named test, re-run the agent up to `N` times with the failing output before the attempt counts as failed (each re-run its own iteration, role debugger)")
	fl.StringVar(&opts.TestFixRole, "test-fix-role", "", "the `ROLE` of --test-fix re-runs (default debugger)")
	fl.BoolVar(&opts.PlanApproval, "plan-approval", false, "each story's first iteration writes a plan to .ralph/plans/<id>.md and changes no code; the story waits (others go on) until ralph approve ID (or ralph reject ID --reason …)")
	fl.DurationVar(&opts.AskTimeout, "ask-timeout", 0, "an agent's question to a person (ralph ask) that nobody answers within this `DURATION` stops waiting: its item goes on without an answer, told to decide alone and say what it assumed (default 0: the item waits as long as the run runs, and the run waits for it when nothing else is left)")
	fl.BoolVar(&opts.AutoApprove, "auto-approve", false, "with --plan-approval: approve every plan as soon as it is written (unattended runs; the plans are still kept)")
	fl.IntVar(&opts.Council, "council", 0, "`K` reviewer agents, each its own process, vote on a critical story (critical: true, or a council rule in roles.yaml) once its gates pass; a majority must approve (default 3)")
	fl.DurationVar(&opts.IterationTimeout, "iteration-timeout", 0, "kill the agent (its whole process group) after this `DURATION` (default 60m)")
	fl.DurationVar(&opts.GateTimeout, "gate-timeout", 0, "time limit (`DURATION`) per quality gate (default 10m)")
	fl.Float64Var(&opts.MaxCost, "max-cost", 0, "stop when the agents' reported cost reaches `USD`")
	fl.Int64Var(&opts.MaxTokens, "max-tokens", 0, "stop when input+output tokens reach `N`")
	fl.Int64Var(&opts.TranscriptMax, "transcript-max-bytes", 0, "cap each transcript at `N` bytes: beyond it the middle of the agent's output is dropped, with a marker, and the first and last N/2 bytes kept (default 50 MB)")
	fl.IntVar(&opts.Parallel, "parallel", 1, "`N` stories at once, each in its own git worktree, merged back through a queue that re-runs the gates (PRD runs)")
	fl.IntVar(&opts.Breaker, "breaker", 5, "circuit breaker: stop (exit 4) after the same failure `N` times in a row, or twice as many iterations without a pass; 0 turns it off")
	fl.DurationVar(&opts.BreakerCooldown, "breaker-cooldown", 0, "after this `DURATION` an open circuit breaker is half-open at the next ralph run: one iteration runs, a success closes it (default 30m; a change to the gate commands, the tree or the config makes it half-open at once)")
	fl.BoolVar(&opts.NoGates, "no-gates", false, "run a source with no quality gate and no story checks: every item then passes on the agent's claim alone")
	fl.BoolVar(&opts.NoLint, "no-lint", false, "run a RUN_DIR that is not Ralph-ready (see ralph runs lint)")
	fl.BoolVar(&opts.Fresh, "fresh", false, "start a new run even if the last run of this source can resume (its state, events and transcripts are kept in .ralph/runs/<run id>/; a corrupt state.json is set aside)")
	fl.BoolVar(&opts.Resume, "resume", false, "resume the last run of this source, even a completed one (which otherwise gives way to a new run when the source has unfinished items); an error when there is none")
	fl.BoolVar(&opts.ReloadPolicy, "reload-policy", false, "take the gates, story checks and flags, .ralph/config.yaml and roles.yaml as the files say now (a person's change since the last run pinned them; reported). Without it ralph restores the policy the last run pinned and keeps the edited files in .ralph/policy-edits/")
	fl.BoolVar(&opts.ResetBreaker, "reset-breaker", false, "when resuming, close the circuit breaker (its counts survive a stop; reset it once the cause is fixed)")
	fl.BoolVar(&opts.TrustMarks, "trust-marks", false, "count items marked done by hand (passes: true in a PRD, a ticked box in a --plan, a task in tasks-done.jsonl) as passed though no commit of ralph's on the branch records them. By default such an item is shown as marked by hand, not verified, and never counted as passed: an agent works on a story to verify it (it passes only on evidence); a task archived by hand is not worked on, and a run left with only those ends unverified (exit 6). Also trust_marks: true in the config")
	fl.BoolVar(&opts.AllowDirty, "allow-dirty", false, "start even if the work tree has uncommitted changes (ralph never commits them)")
	fl.BoolVar(&opts.AllowFailingBaseline, "allow-failing-baseline", false, "no longer needed: a base whose gates fail is work (listed when the run starts, never blamed on a story)")
	_ = fl.MarkHidden("allow-failing-baseline")
	fl.BoolVar(&opts.NoSandbox, "no-sandbox", false, "run the agents and the gates without the sandbox (bubblewrap): they can then write anywhere you can and reach any host")
	fl.BoolVar(&opts.DryRun, "dry-run", false, "print the plan, the first prompt and the exact agent argv and environment (secrets masked); run nothing")
	fl.BoolVar(&opts.JSON, "json", false, "print events as JSON lines on stdout")
	fl.BoolVar(&opts.Plain, "plain", false, "one timestamped line per event instead of the live dashboard a terminal gets")
	fl.BoolVar(&opts.NoMask, "no-mask", false, "keep secrets as they are in transcripts, progress, state and events (by default values of *KEY*, *TOKEN*, *SECRET*, *PASSWORD* variables and API-key shapes are masked)")
	fl.StringVar(&opts.Preset, "preset", "", "`NAME` of a set of bounds: nova (Nova26's loop: iterations = items × 3, 2 attempts — one retry with the failure —, each plan written and approved at once, up to 3 test-fix re-runs); flags given win")
	fl.IntVar(&opts.MaxCallsPerHour, "max-calls-per-hour", 0, "start at most `N` agents in any hour (reviewers and council members included); beyond it the next start waits (default no limit)")
	fl.DurationVar(&opts.RateLimitBackoff, "rate-limit-backoff", 0, "first wait (`DURATION`) after a rate limit without a reset time (default 1m, doubling to 30m)")
	fl.BoolVar(&opts.Watch, "watch", false, "with --tasks: when no task is ready, wait for new ones (no agent runs) until ralph stop or Ctrl-C")
	fl.DurationVar(&opts.Interval, "interval", 30*time.Second, "with --watch: how often (`DURATION`) to look for new tasks")
	fl.StringArrayVar(&opts.Notify, "notify", nil, "webhook `URL` that gets a JSON POST when the run ends, an item is blocked or a rate limit pauses it (repeatable)")
	fl.StringVar(&opts.NotifyCommand, "notify-command", "", "shell `COMMAND` that gets the same events as JSON on stdin (a desktop notification, a chat tool)")
	fl.StringVar(&opts.Progress, "progress", "", "`WHERE` the progress memory lives: ralph (.ralph/progress.md, the default), repo (also "+app.RepoProgressFile+" in the repository: the agents keep it, it is committed with each item and travels with the branch) or agents-md (the codebase patterns in AGENTS.md, CLAUDE.md for claude, between markers: every agent CLI reads it by itself; the agents keep it, committed with each item)")
	fl.IntVar(&opts.ProgressBudget, "progress-budget", 0, "`TOKENS` of progress.md a prompt carries (default 2000): a quarter for the codebase patterns the summariser keeps, the rest for the newest entries")
	fl.StringVar(&opts.Summarizer, "summarizer", "", "agent `NAME` that folds older progress entries into the codebase patterns (default the run's agent; native for a cheap model)")
	fl.StringVar(&opts.SummarizerCmd, "summarizer-cmd", "", "for --summarizer cmd: the program and its arguments (`ARGV`)")
	fl.StringVar(&opts.SummarizerModel, "summarizer-model", "", "the summariser's model `NAME`")
	fl.StringArrayVar(&opts.Gates, "gate", nil, "with --tasks, --issues or --plan: quality gate `NAME=COMMAND` (repeatable; also gates: in .ralph/config.yaml); --tasks runs it on the task branch before merging; in a plain loop: run after each iteration, the promise counts only when they pass")
	fl.BoolVar(&opts.AgentAll, "agent-all", false, "the agent flags (--agent, --agent-cmd, --model) set every role's agent too, over roles.yaml's agents: (by default they set the worker's; a role's own agent wins for that role)")
	completeAgents(cmd, "agent", "summarizer")
	groupFlags(cmd, []flagGroup{
		{"Work source", []string{"prd", "tasks", "pipeline", "issues", "close-issues", "plan", "plan-completed", "no-lint", "gate", "watch", "interval", "no-gates", "no-commit", "error-wait"}},
		{"Agent", []string{"agent", "agent-all", "agent-cmd", "agent-arg", "script", "model", "base-url", "provider", "prompt", "promise", "summarizer", "summarizer-cmd", "summarizer-model"}},
		{"Limits", []string{"max-iterations", "max-attempts", "max-item-iterations", "iteration-timeout", "gate-timeout", "max-cost", "max-tokens", "breaker", "breaker-cooldown", "rate-limit-backoff", "max-calls-per-hour", "preset", "progress", "progress-budget", "transcript-max-bytes"}},
		{"Roles and review", []string{"test-fix", "test-fix-role", "plan-approval", "auto-approve", "council", "ask-timeout"}},
		{"Parallel", []string{"parallel"}},
		{"State", []string{"fresh", "resume", "reload-policy", "reset-breaker", "allow-dirty", "trust-marks"}},
		{"Output", []string{"plain", "json", "dry-run", "no-mask", "notify", "notify-command", "pr", "pr-remote"}},
	})
}

// applyConfig fills the flags not given from .ralph/config.yaml, once the
// policy files are what the run pinned (checkPolicy).
func (o *RunOptions) applyConfig(ctx context.Context) error {
	root, _, err := o.IO.Repo(ctx)
	if err != nil {
		return err
	}
	if err := o.checkPolicy(root); err != nil {
		return err
	}
	l, err := o.IO.Settings(root)
	if err != nil {
		return err
	}
	c := l.Config
	set := o.flagSet
	str := func(dst *string, name, v string) {
		if !set(name) && v != "" {
			*dst = v
		}
	}
	// A source given on the command line wins over every source in the
	// config, not just the one of the same kind.
	if !set("prd") && !set("tasks") && !set("pipeline") && !set("issues") && !set("plan") && o.RunDir == "" && !o.PlainLoop {
		str(&o.PRD, "prd", c.PRD)
		str(&o.Tasks, "tasks", c.Tasks)
		str(&o.Pipeline, "pipeline", c.Pipeline)
	}
	applyAgentConfig(&o.AgentSpec, c, set)
	str(&o.Summarizer, "summarizer", c.Summarizer)
	str(&o.NotifyCommand, "notify-command", c.NotifyCommand)
	str(&o.NotifyCommand, "notify-command", c.Notify.Command)
	if !set("notify") && len(c.Notify.Webhooks) > 0 {
		o.Notify = c.Notify.Webhooks
	}
	o.NotifyTo = c.Notify
	o.Protected, o.ProtectedRule = c.Protected, c.ProtectedRule
	str(&o.SummarizerCmd, "summarizer-cmd", c.SummarizerCmd)
	str(&o.SummarizerModel, "summarizer-model", c.SummarizerModel)
	str(&o.Progress, "progress", c.Progress)
	if !set("progress-budget") && c.ProgressBudgetTokens > 0 {
		o.ProgressBudget = c.ProgressBudgetTokens
	}
	str(&o.Prompt, "prompt", c.Prompt)
	str(&o.Promise, "promise", c.Promise)
	if !set("max-iterations") && c.MaxIterations > 0 {
		o.MaxIterations = c.MaxIterations
	}
	if !set("max-attempts") && c.MaxAttempts > 0 {
		o.MaxAttempts = c.MaxAttempts
	}
	if !set("max-item-iterations") && c.MaxItemIterations > 0 {
		o.MaxItemIterations = c.MaxItemIterations
	}
	if !set("test-fix") && c.TestFix > 0 {
		o.TestFix = c.TestFix
	}
	str(&o.TestFixRole, "test-fix-role", c.TestFixRole)
	if !set("plan-approval") && c.PlanApproval {
		o.PlanApproval = true
	}
	if !set("auto-approve") && c.AutoApprove {
		o.AutoApprove = true
	}
	if !set("trust-marks") && c.TrustMarks {
		o.TrustMarks = true
	}
	if !set("council") && c.Council > 0 {
		o.Council = c.Council
	}
	if !set("iteration-timeout") && c.IterationTimeout > 0 {
		o.IterationTimeout = time.Duration(c.IterationTimeout)
	}
	if !set("gate-timeout") && c.GateTimeout > 0 {
		o.GateTimeout = time.Duration(c.GateTimeout)
	}
	if !set("breaker") && c.Breaker != nil {
		o.Breaker = *c.Breaker
	}
	if !set("breaker-cooldown") && c.BreakerCooldown > 0 {
		o.BreakerCooldown = time.Duration(c.BreakerCooldown)
	}
	if !set("parallel") && c.Parallel > 0 {
		o.Parallel = c.Parallel
	}
	if !set("max-cost") && c.MaxCost > 0 {
		o.MaxCost = c.MaxCost
	}
	if !set("transcript-max-bytes") && c.TranscriptMaxBytes > 0 {
		o.TranscriptMax = c.TranscriptMaxBytes
	}
	if !set("max-tokens") && c.MaxTokens > 0 {
		o.MaxTokens = c.MaxTokens
	}
	if !set("ask-timeout") && c.AskTimeout > 0 {
		o.AskTimeout = time.Duration(c.AskTimeout)
	}
	if !set("error-wait") && c.ErrorWait != nil {
		o.ErrorWait = time.Duration(*c.ErrorWait)
	}
	if !set("rate-limit-backoff") && c.RateLimitBackoff > 0 {
		o.RateLimitBackoff = time.Duration(c.RateLimitBackoff)
	}
	if !set("max-calls-per-hour") && c.MaxCallsPerHour > 0 {
		o.MaxCallsPerHour = c.MaxCallsPerHour
	}
	if !set("gate") && len(c.Gates) > 0 {
		o.Gates = append(o.Gates, sortedPairs(c.Gates)...)
	}
	if !set("watch") && c.Watch {
		o.Watch = true
	}
	if !set("interval") && c.Interval > 0 {
		o.Interval = time.Duration(c.Interval)
	}
	str(&o.Preset, "preset", c.Preset)
	if err := o.applyPreset(); err != nil {
		return err
	}
	o.SandboxConfig, err = app.SandboxSettings(l)
	return err
}

// checkPolicy checks the policy files against the policy the saved run
// pinned before any of them is read (internal/policy): a resume restores
// and reports what changed, or takes it with --reload-policy.
func (o *RunOptions) checkPolicy(root string) error {
	return o.CheckPolicy(root, o.IO.IO.ErrOut)
}

// sortedPairs renders m as KEY=VALUE strings in key order.
func sortedPairs(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, k+"="+m[k])
	}
	return out
}

// runRun is `ralph run` (and `ralph coordinator`): the flags are checked
// on their own, then the run is opened (everything the engine's Config
// holds), then it runs.
func runRun(ctx context.Context, o *RunOptions) error {
	if err := o.validate(); err != nil {
		return err
	}
	if o.AllowFailingBaseline {
		fmt.Fprintln(o.IO.IO.ErrOut, noFailingBaselineFlag)
	}
	r, err := app.Open(ctx, &o.Options, o.deps())
	if err != nil {
		return err
	}
	return o.run(ctx, r)
}

// deps are what the run takes from the command: the repository, the
// gate and process runners, the streams, a coordinator's workers.
func (o *RunOptions) deps() app.Deps {
	f := o.IO
	d := app.Deps{Repo: f.Repo, Gates: f.GateRunner, Runner: f.runner(), Getwd: f.Getwd, ErrOut: f.IO.ErrOut}
	if o.coord != nil {
		d.Remote = o.coord
	}
	return d
}

// noFailingBaselineFlag answers the flag older versions needed.
const noFailingBaselineFlag = "ralph: --allow-failing-baseline is no longer needed: a base whose gates fail is work, listed when the run starts and never blamed on a story (the flag does nothing)"

// validate checks what the flags say on their own, before the repository
// or the source is read.
func (o *RunOptions) validate() error {
	switch {
	case o.Parallel < 1:
		return usage.Errorf("--parallel must be at least 1")
	case o.Fresh && o.Resume:
		return usage.Errorf("--fresh starts a new run and --resume continues the last one: give one of them")
	case o.TestFix < 0:
		return usage.Errorf("--test-fix must be 0 or more")
	case o.Council < 0:
		return usage.Errorf("--council must be at least 1")
	case o.AutoApprove && !o.PlanApproval:
		return usage.Errorf("--auto-approve approves the plans of --plan-approval: give both")
	case o.MaxCallsPerHour < 0:
		return usage.Errorf("--max-calls-per-hour must be 0 (no limit) or more")
	case o.AskTimeout < 0:
		return usage.Errorf("--ask-timeout must be 0 (wait as long as the run runs) or more")
	case o.ErrorWait < 0:
		return usage.Errorf("--error-wait must be 0 (no wait) or more")
	case o.ProgressBudget < 0:
		return usage.Errorf("--progress-budget must be positive")
	case o.Progress != "" && !slices.Contains(config.ProgressPlaces, o.Progress):
		return usage.Errorf("--progress must be %s, got %q", config.ProgressChoice(), o.Progress)
	}
	if o.Prompt != "" {
		if _, err := os.Stat(o.Prompt); err != nil {
			return usage.Errorf("--prompt: %v", err)
		}
	}
	return nil
}

// run shows the run's events (JSON lines, the plain log or the
// dashboard), runs it and prints the summary; a dry run prints the plan
// instead.
func (o *RunOptions) run(ctx context.Context, r *app.Run) error {
	cfg, out := r.Config(), o.IO.IO
	if o.coord != nil {
		var cancel context.CancelFunc
		ctx, cancel = o.coord.runContext(ctx)
		defer cancel()
	}
	defer r.Close(ctx)
	if o.JSON {
		enc := json.NewEncoder(out.Out)
		cfg.OnEvent = func(ev engine.Event) { _ = enc.Encode(ev) }
	} else {
		every, err := heartbeatInterval()
		if err != nil {
			return err
		}
		pp := newPlainPrinter(out.ErrOut, out.Color())
		cfg.OnEvent = pp.event
		hctx, stop := context.WithCancel(ctx)
		defer stop()
		go pp.heartbeat(hctx, every)
	}
	if o.coord != nil {
		o.coord.c.Observe(ctx, r.Repo(), cfg)
	}
	if o.DryRun {
		return dryRun(ctx, o, r)
	}
	if b, err := os.ReadFile(cfg.Paths.Pause); err == nil {
		// A pause asked for with no run active holds this one: said
		// at its start, with the way out.
		fmt.Fprintf(out.ErrOut, "ralph: this run starts paused: .ralph/pause is there (%s); `ralph resume` lets it start, `ralph stop` ends it\n", strings.TrimSpace(string(b)))
	}
	if !o.JSON && !o.Plain && out.IsInteractive() {
		cfg.OnEvent, r.Drive = withDashboard(out, cfg.Paths, cfg.OnEvent)
	}
	outcome, err := r.Run(ctx)
	if err != nil && outcome.State == nil {
		return err
	}
	if !o.JSON {
		printSummary(out.ErrOut, outcome, cfg.Paths)
	}
	if outcome.Status == engine.StatusComplete {
		return nil
	}
	if err != nil && usage.Is(err) {
		// The run could not start on what the person gave it (said in
		// the summary): theirs to change.
		return &exitError{code: exitUsage}
	}
	return &statusError{status: outcome.Status, reason: outcome.Reason}
}

func printSummary(w io.Writer, o engine.Outcome, p engine.Paths) {
	st := o.State
	passed, blocked, total := st.Counts()
	fmt.Fprintf(w, "\nralph: run %s ended: %s — %s\n", st.RunID, o.Status, o.Reason)
	fmt.Fprintf(w, "ralph: %d/%d passed%s, %d blocked, %s", passed, total, engine.MarkedCount(len(st.Marked())), blocked, engine.Plural(st.Iteration, "iteration"))
	if st.Usage.InputTokens+st.Usage.OutputTokens > 0 {
		fmt.Fprintf(w, ", %d tokens", st.Usage.InputTokens+st.Usage.OutputTokens)
	}
	if st.Usage.CostUSD > 0 {
		fmt.Fprintf(w, ", $%.4f", st.Usage.CostUSD)
	}
	fmt.Fprintln(w)
	for _, id := range st.Order {
		is := st.Items[id]
		line := fmt.Sprintf("  %-8s %-8s %s", is.Status, id, is.Title)
		if is.Commit != "" {
			line += "  (" + is.Commit[:min(8, len(is.Commit))] + ")"
		}
		if (is.Status == engine.ItemBlocked || is.Status == engine.ItemMarked) && is.Reason != "" {
			line += "  — " + is.Reason
		}
		fmt.Fprintln(w, line)
	}
	if st.Untracked > 0 {
		fmt.Fprintf(w, "  pending  … and %d more, not started yet\n", st.Untracked)
	}
	fmt.Fprintf(w, "ralph: transcripts in %s, progress in %s\n", p.Transcripts, p.Progress)
	if next := st.NextStep(); next != "" {
		fmt.Fprintf(w, "ralph: next: %s\n", next)
	}
}

// dryRun prints what the next iteration would be, as the engine computes
// it for a real run (engine.Plan), and writes nothing.
func dryRun(ctx context.Context, o *RunOptions, r *app.Run) error {
	w := o.IO.IO.Out
	root, cfg := r.Root(), *r.Config()
	plan, err := r.Plan(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "source: %s %s\n", plan.Source.Kind, plan.Source.Path)
	fmt.Fprintf(w, "items: %d\n", plan.Items)
	if plan.Item == nil {
		if plan.StopStatus != "" {
			fmt.Fprintf(w, "next: nothing would start: %s (%s)\n", plan.StopReason, plan.StopStatus)
		} else {
			fmt.Fprintln(w, "next: nothing is ready")
		}
		return nil
	}
	it := plan.Item
	fmt.Fprintf(w, "next: %s %s — %s\n", it.Kind, it.ID, it.Title)
	switch {
	case plan.Role != "":
		fmt.Fprintf(w, "role: %s, because %s\n", plan.Role, plan.RoleWhy)
	case plan.RoleWhy != "":
		fmt.Fprintf(w, "role: none, because %s\n", plan.RoleWhy)
	case cfg.Roles != nil && cfg.Roles.TriggersFrom != "":
		fmt.Fprintf(w, "role: none (no trigger in %s holds)\n", relOr(root, cfg.Roles.TriggersFrom))
	}
	inv, err := plan.Agent.Agent.Plan(plan.Request)
	if err != nil {
		return err
	}
	if plan.Agent.From != "" && plan.Agent.From != "the run's agent" {
		fmt.Fprintf(w, "agent: %s (from %s)\n", plan.Agent.Name, plan.Agent.From)
	} else {
		fmt.Fprintf(w, "agent: %s\n", plan.Agent.Name)
	}
	if plan.Agent.Model != "" {
		fmt.Fprintf(w, "model: %s\n", plan.Agent.Model)
	}
	printRoleAgents(w, cfg, it)
	if len(inv.Argv) > 0 {
		fmt.Fprintf(w, "argv: %s\n", proc.QuoteArgv(inv.Argv))
	}
	if inv.Note != "" {
		fmt.Fprintf(w, "runs: %s\n", inv.Note)
	}
	if inv.PromptStdin {
		fmt.Fprintln(w, "stdin: the prompt, then closed")
	} else {
		fmt.Fprintln(w, "stdin: closed")
	}
	fmt.Fprintln(w, "env set by ralph (on top of yours):")
	for _, kv := range agent.MaskEnv(append(append([]string{}, inv.Env...), plan.Request.Env...)) {
		fmt.Fprintf(w, "  %s\n", kv)
	}
	for p := range inv.Files {
		fmt.Fprintf(w, "writes: %s\n", p)
	}
	fmt.Fprintf(w, "prompt template: %s\n--- prompt ---\n%s\n--- end ---\n", plan.TemplateFrom, plan.Prompt)
	return nil
}

// printRoleAgents lists the agent each role of the item would run with,
// and where that choice comes from: the worker's, the roles that have
// their own in roles.yaml, the reviewer's and the council's.
func printRoleAgents(w io.Writer, cfg engine.Config, it *engine.Item) {
	if cfg.Agent.For == nil {
		return
	}
	names := []string{"", "reviewer", "council"}
	if cfg.Roles != nil {
		for _, r := range slices.Sorted(maps.Keys(cfg.Roles.Agents)) {
			if !slices.Contains(names, r) {
				names = append(names, r)
			}
		}
	}
	fmt.Fprintln(w, "agents by role:")
	for _, r := range names {
		c, err := cfg.Agent.For(it, r)
		label := r
		if label == "" {
			label = "worker"
		}
		switch {
		case err != nil:
			fmt.Fprintf(w, "  %-10s error: %v\n", label, err)
		case c.Agent == nil || c.From == "" || c.From == "the run's agent":
			fmt.Fprintf(w, "  %-10s %s (the run's agent)\n", label, orRun(c.Name, cfg.Agent.Name))
		default:
			fmt.Fprintf(w, "  %-10s %s (from %s)\n", label, orRun(c.Name, cfg.Agent.Name), c.From)
		}
	}
}

func orRun(name, run string) string {
	if name == "" {
		return run
	}
	return name
}
