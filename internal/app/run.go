package app

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ralph-loop/ralph/internal/agent"
	"github.com/ralph-loop/ralph/internal/config"
	"github.com/ralph-loop/ralph/internal/decide"
	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/gate"
	"github.com/ralph-loop/ralph/internal/git"
	"github.com/ralph-loop/ralph/internal/github"
	"github.com/ralph-loop/ralph/internal/judge"
	"github.com/ralph-loop/ralph/internal/plan"
	"github.com/ralph-loop/ralph/internal/policy"
	"github.com/ralph-loop/ralph/internal/proc"
	"github.com/ralph-loop/ralph/internal/runfolder"
	"github.com/ralph-loop/ralph/internal/sandbox"
	"github.com/ralph-loop/ralph/internal/secret"
	"github.com/ralph-loop/ralph/internal/source"
	"github.com/ralph-loop/ralph/internal/usage"
)

// Options are what a run needs, as plain data: the CLI fills them from
// its flags and the config files (flags win).
type Options struct {
	PRD      string
	Tasks    string
	Pipeline string
	// Issues is a GitHub search (--issues): its open issues are the work.
	Issues string
	// Plan is a markdown checklist plan (--plan); PlanCompleted the folder
	// a finished one moves to ("-": it stays).
	Plan          string
	PlanCompleted string
	// PR opens or updates the run's pull request (--pr) after pushing
	// the feature branch to PRRemote; CloseIssues closes an issue that
	// passed (else ralph only comments).
	PR          bool
	PRRemote    string
	CloseIssues bool
	RunDir      string
	NoLint      bool
	NoGates     bool
	// Protected and ProtectedRule are the config's: more protected
	// globs, and how a protected Go test file is kept.
	Protected     []string
	ProtectedRule string
	AgentSpec
	Prompt string
	// PlainLoop runs Prompt as the plain Ralph loop (`ralph loop FILE`):
	// also without it when --prompt is given and there is no PRD.
	PlainLoop bool
	// NoCommit leaves a plain loop's work uncommitted.
	NoCommit bool
	// ErrorWait is the plain loop's wait after an agent's non-zero exit.
	ErrorWait time.Duration
	// AskTimeout: an agent's question nobody answered this long stops
	// waiting (0: it waits as long as the run runs).
	AskTimeout time.Duration
	// AgentAll gives every role the agent flags' agent, over roles.yaml's
	// agents: (by default the flags set the worker's).
	AgentAll          bool
	Promise           string
	MaxIterations     int
	MaxAttempts       int
	MaxItemIterations int
	TestFix           int
	TestFixRole       string
	PlanApproval      bool
	AutoApprove       bool
	Council           int
	IterationTimeout  time.Duration
	GateTimeout       time.Duration
	MaxCost           float64
	MaxTokens         int64
	TranscriptMax     int64
	AllowDirty        bool
	// AllowFailingBaseline is an older version's flag: a failing base is
	// work now, so it does nothing but say so.
	AllowFailingBaseline bool
	Parallel             int
	Breaker              int
	BreakerCooldown      time.Duration
	DryRun               bool
	Fresh                bool
	Resume               bool
	// ReloadPolicy takes the policy in the files (reported); without it
	// a start restores the one the last run pinned.
	ReloadPolicy bool
	ResetBreaker bool
	// TrustMarks counts items a person marked done (passes: true, a
	// ticked box, an archived task) as passed without ralph's commit.
	TrustMarks       bool
	NoMask           bool
	JSON             bool
	Plain            bool
	RateLimitBackoff time.Duration
	MaxCallsPerHour  int
	// Preset names a set of bounds (nova: Nova26's loop, preset.go).
	Preset string
	// The task loop's (--tasks) own settings.
	Watch    bool
	Interval time.Duration
	Gates    []string // NAME=COMMAND
	// Notifications.
	Notify        []string
	NotifyCommand string
	NotifyTo      config.Notify // the config's notify: section
	// Progress memory.
	ProgressBudget  int
	Progress        string // ralph | repo (RepoProgressFile, kept by the agents) | agents-md (agentsFile)
	Summarizer      string
	SummarizerCmd   string
	SummarizerModel string
	// FlagSet reports whether a flag was given on the command line (flags
	// win over the config file; nil: none was).
	FlagSet func(name string) bool
	// Policy is the run's pinned policy, checked before any policy file
	// is read (CheckPolicy).
	Policy *policy.Guard
	// NoSandbox runs agents and gates unconfined; SandboxConfig is the
	// config's `sandbox:` (the user's and the project's, SandboxSettings).
	NoSandbox     bool
	SandboxConfig config.Sandbox
}

// Deps are what the CLI owns and a run uses: handed in, never globals.
type Deps struct {
	// Repo finds the repository the run is in: its top level and git.
	Repo func(ctx context.Context) (root string, repo *git.Repo, err error)
	// Gates is the gate runner with a time limit per gate (0: default).
	Gates func(timeout time.Duration) gate.Runner
	// Runner starts the processes of notifications and of gh.
	Runner proc.Runner
	// Getwd is the working folder relative paths are taken from.
	Getwd func() (string, error)
	// ErrOut gets the run's warnings and the notes of its side effects.
	ErrOut io.Writer
	// Remote runs the agents on other machines (ralph coordinator); nil
	// for a run on this one.
	Remote Remote
}

// Remote is where the agents run when they run on workers: Start readies
// it for the source and returns the agent that queues their jobs, Judge
// makes the run's judge its own (the workers' results), Stop ends it.
type Remote interface {
	Start(ctx context.Context, o *Options, root string, repo *git.Repo, src engine.Source) (agent.Agent, error)
	Judge(j *judge.Judge)
	Stop(ctx context.Context, repo *git.Repo)
}

// opener opens a run: the options with the CLI's dependencies, and what
// opening found (the repository, the sandbox, a --plan's plan).
type opener struct {
	*Options
	d       Deps
	root    string
	sandbox *sandbox.Sandbox
	plan    *plan.Plan
}

// flag reports whether the flag name was given on the command line.
func (o *Options) flag(name string) bool { return o.FlagSet != nil && o.FlagSet(name) }

// abs is p made absolute against the CLI's working folder.
func (o *opener) abs(p string) string { return Abs(o.d.Getwd, p) }

// Abs is p made absolute against the working folder getwd names (the
// process's own may differ in tests).
func Abs(getwd func() (string, error), p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	wd, _ := getwd()
	return filepath.Join(wd, p)
}

// CheckPolicy checks the policy files against the policy the saved run
// pinned before any of them is read (internal/policy): a resume restores
// and reports what changed (on errOut), or takes it with --reload-policy.
func (o *Options) CheckPolicy(root string, errOut io.Writer) error {
	if o.Policy != nil {
		return nil
	}
	g, err := policy.Check(engine.PathsFor(root), policy.Options{Reload: o.ReloadPolicy, Fresh: o.Fresh, Resume: o.Resume, DryRun: o.DryRun}, errOut)
	o.Policy = g
	return err
}

// Run is a run ready to start: the engine's settings and what the run
// owns (the repository, the sandbox, the judge in the Config, the plain
// loop's log); its notifications start with Run.
type Run struct {
	o    *opener
	repo *git.Repo
	cfg  engine.Config
	// loopLog is the plain loop's ralph.log (nil for other runs).
	loopLog *loopLog
	// Drive, when set, runs the engine in front of a view (the CLI's
	// dashboard): it calls run and returns its outcome.
	Drive func(ctx context.Context, run func(context.Context) (engine.Outcome, error)) (engine.Outcome, error)
}

// Config is the engine's settings: the CLI sets how events are shown
// (OnEvent) and reads them for a dry run.
func (r *Run) Config() *engine.Config { return &r.cfg }

// Repo is the repository the run is in.
func (r *Run) Repo() *git.Repo { return r.repo }

// Root is the repository's top level.
func (r *Run) Root() string { return r.o.root }

// Close stops what the run started besides the engine: a coordinator's
// workers' queue.
// Plan is what the run would do next, without doing it (--dry-run).
func (r *Run) Plan(ctx context.Context) (engine.Plan, error) {
	eng, err := engine.New(r.cfg)
	if err != nil {
		return engine.Plan{}, err
	}
	return eng.Plan(ctx)
}

func (r *Run) Close(ctx context.Context) {
	if r.o.d.Remote != nil {
		r.o.d.Remote.Stop(ctx, r.repo)
	}
}

// Run records the run's sandbox, sends its notifications (and hears a
// chat's answers), reports on GitHub issues while it runs, runs the
// engine, then does what follows a run: git's maintenance, the plain
// loop's last line, the last reports, a finished plan moved, the pull
// request. An error with no State is a run that did not start.
func (r *Run) Run(ctx context.Context) (engine.Outcome, error) {
	o, cfg := r.o, r.cfg
	// The run's sandbox record (.ralph/sandbox.json), or none for a run
	// without the sandbox, so that status never shows an earlier run's.
	if o.sandbox != nil {
		o.sandbox.Save()
	} else {
		_ = os.Remove(sandbox.RecordFile(cfg.Paths.Dir))
	}
	notify, err := o.notifier(cfg.Paths)
	if err != nil {
		return engine.Outcome{}, err
	}
	defer notify.wait()
	if notify != nil && len(notify.chats) > 0 {
		// A reply in a chat answers an agent's question.
		lctx, stop := context.WithCancel(ctx)
		defer stop()
		go notify.listen(lctx, func() string { return runIDOf(cfg.Paths) })
	}
	var reporter *github.Reporter
	if o.Issues != "" {
		reporter = &github.Reporter{GH: o.gh(o.root), Record: filepath.Join(cfg.Paths.Dir, github.RecordFile), Close: o.CloseIssues, Mask: Masker(o.NoMask, o.Env), Logf: o.logf}
		rctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); reportWhileRunning(rctx, cfg.Paths, reporter, 2*time.Second) }()
		defer func() { stop(); <-done }()
	}
	if notify != nil {
		display := cfg.OnEvent
		cfg.OnEvent = func(ev engine.Event) {
			if display != nil {
				display(ev)
			}
			notify.event(ev)
		}
	}
	eng, err := engine.New(cfg)
	if err != nil {
		return engine.Outcome{}, err
	}
	var outcome engine.Outcome
	if r.Drive != nil {
		outcome, err = r.Drive(ctx, eng.Run)
	} else {
		outcome, err = eng.Run(ctx)
	}
	r.repo.Maintain(context.WithoutCancel(ctx))
	if r.loopLog != nil {
		r.loopLog.end(outcome)
	}
	if err != nil && outcome.State == nil {
		return outcome, err
	}
	r.afterRun(ctx, outcome.State, reporter)
	return outcome, err
}

// Open finds the repository, opens the source, the roles and the
// agents (a coordinator's: started on NATS), checks that what the run
// needs is there, and fills the engine's Config. Nothing of the run is
// written yet.
func Open(ctx context.Context, opts *Options, d Deps) (_ *Run, err error) {
	o := &opener{Options: opts, d: d}
	root, repo, err := d.Repo(ctx)
	if err != nil {
		return nil, err
	}
	if err := o.CheckPolicy(root, d.ErrOut); err != nil {
		return nil, err
	}
	paths := engine.PathsFor(root)
	var orch *runfolder.OrchestrationFile
	var runDir string
	if o.RunDir != "" {
		if runDir, orch, err = o.openRunFolder(ctx, root, repo, &paths); err != nil {
			return nil, err
		}
	}
	// Git's auto-maintenance runs once when the run ends instead of after
	// every commit.
	repo.BatchMaintenance = true
	// The sandbox, or why it cannot start: before anything is written.
	if o.sandbox, err = OpenSandbox(o.SandboxConfig, o.NoSandbox, paths); err != nil && !o.DryRun {
		return nil, err
	}
	gates := ConfinedGates(d.Gates(o.GateTimeout), o.sandbox)
	src, err := o.openSource(ctx, root, repo, gates)
	if err != nil {
		return nil, err
	}
	if orch != nil {
		if src, err = source.OpenCadence(src.(*source.PRD), root, runDir, *orch); err != nil {
			return nil, err
		}
	}
	if err := o.checkSource(root, src); err != nil {
		return nil, err
	}
	if err := CheckItemAgents(src); err != nil {
		return nil, err
	}
	rs, err := LoadRoles(root)
	if err != nil {
		return nil, err
	}
	ags, err := o.RunAgents()
	if err != nil {
		return nil, err
	}
	ag, sum, sumModel := ags[0].agent, ags[len(ags)-1].agent, ags[len(ags)-1].model
	if d.Remote != nil {
		// Stopped when the run ends, or here when it does not open.
		defer func() {
			if err != nil {
				d.Remote.Stop(ctx, repo)
			}
		}()
		remote, err := d.Remote.Start(ctx, o.Options, root, repo, src)
		if err != nil {
			return nil, err
		}
		// The agent runs on the workers (not checked here); a summariser
		// of progress memory stays on this machine.
		ags[0].agent, ag = remote, remote
		o.Plain = true
	}
	// Before anything is written (the branch, the state): what the run
	// needs is there, or every missing piece is named with its fix.
	if err := PreflightError(append(Preflight(ctx, root, repo, append(ags, o.RoleAgents(root, rs, ag)...), src.Info().Commands), o.CLIHostsChecks()...)); err != nil {
		if !o.DryRun {
			return nil, err
		}
		fmt.Fprintf(d.ErrOut, "ralph: warning: %v\n", err)
	}
	// A tree a new run refuses, refused now: before the baseline's gates
	// run, and before the lock, the sandbox record or the baseline are
	// written (the engine checks again as it starts).
	if o.surelyNew(paths, src.Info()) {
		if c := o.TreeCheck(ctx, root, repo, src.Info()); c.Err != nil && !o.DryRun {
			return nil, c.Err
		}
	}
	o.root = root
	rules, err := decide.Rules(decide.Options{Paths: paths, Roles: rs, PlanApproval: o.PlanApproval, AutoApprove: o.AutoApprove,
		Council: o.Council, TestFix: o.TestFix, TestFixRole: o.TestFixRole})
	if err != nil {
		return nil, err
	}
	cfg := engine.Config{
		Paths: paths, Source: src, Git: repo, Parallel: o.Parallel, NoMask: o.NoMask, TrustMarks: o.TrustMarks, Roles: rs, Deciders: rules,
		Agent:  engine.AgentConfig{Default: o.confine(ag, paths), Name: o.Agent, Model: o.Model, Env: o.Env, For: o.confinedChooser(o.AgentChooser(root, rs, ag), paths)},
		Prompt: engine.PromptConfig{Paths: o.promptPaths(root, runDir), Promise: o.Promise},
		Limits: engine.Limits{MaxIterations: o.MaxIterations, MaxAttempts: o.MaxAttempts, MaxItemIterations: o.MaxItemIterations,
			IterationTimeout: o.IterationTimeout, MaxCost: o.MaxCost, MaxTokens: o.MaxTokens, TranscriptMax: o.TranscriptMax, BreakerThreshold: o.Breaker,
			BreakerCooldown: o.BreakerCooldown, AskTimeout: o.AskTimeout},
		RateLimit: engine.RateLimitConfig{Backoff: o.RateLimitBackoff, MaxCallsPerHour: o.MaxCallsPerHour},
		Progress:  engine.ProgressConfig{Budget: o.ProgressBudget, Summarizer: o.confine(sum, paths), SummarizerModel: sumModel, InRepo: o.repoProgress(), AgentsFile: o.agentsFile()},
		Start: engine.StartConfig{Fresh: o.Fresh, Resume: o.Resume, ResetBreaker: o.ResetBreaker, AllowDirty: o.AllowDirty, Setup: SetupFiles(),
			Fingerprint: breakerFingerprint(root, repo, src.Info().Commands)},
	}
	if !o.DryRun {
		if info := src.Info(); info.Kind == "prd" {
			o.Policy.PRD = info.PRDPath
		}
		if o.Pipeline != "" && o.Pipeline != "pagent" {
			o.Policy.Whole = append(o.Policy.Whole, o.abs(o.Pipeline))
		}
		cfg.Policy = o.Policy
		for _, f := range []string{o.repoProgress(), o.agentsFile()} {
			if f == "" {
				continue
			}
			// Stories that each append to the progress file (or add to
			// the patterns) merge as both additions (git's union merge),
			// not as a conflict.
			if err := repo.EnsureAttribute(ctx, "/"+f+" merge=union"); err != nil {
				return nil, fmt.Errorf("setting the union merge for %s in .git/info/attributes: %w", f, err)
			}
		}
	}
	mask := secret.FromEnv(o.Env...)
	if o.NoMask {
		mask = nil
	}
	j, err := NewJudge(repo, paths, gates, o.sandbox, mask)
	if err != nil {
		return nil, err
	}
	j.NoGates = o.NoGates
	j.Protect, j.Declarations = o.Protected, o.ProtectedRule == "declarations"
	if d.Remote != nil {
		d.Remote.Judge(j)
	}
	cfg.Judge = j
	if n := o.presetIterations(src); n > 0 {
		cfg.Limits.MaxIterations = n
	}
	if l, ok := src.(*source.Loop); ok {
		// The user's prompt as is, every iteration.
		cfg.Prompt.Text = source.LiteralTemplate(l.Prompt)
		if cfg.Limits.MaxIterations <= 0 {
			cfg.Limits.MaxIterations = l.MaxIterations
		}
	}
	// The task loop's own: the agent finds the task tree, and --watch.
	if o.Tasks != "" {
		cfg.Agent.Env = append(cfg.Agent.Env, "RALPH_TASKS_FILE="+src.Info().Path)
		if o.Watch {
			cfg.Watch = o.Interval
			if cfg.Watch <= 0 {
				cfg.Watch = 30 * time.Second
			}
			if cfg.Limits.MaxIterations <= 0 {
				// Watching is open-ended: each task is still bounded by
				// --max-attempts, the run by --max-cost / --max-tokens.
				cfg.Limits.MaxIterations = engine.Unlimited
			}
		}
	}
	r := &Run{o: o, repo: repo, cfg: cfg}
	if _, ok := src.(*source.Loop); ok && !o.DryRun {
		if err := r.paceLoop(ctx); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// surelyNew reports whether the engine will start a new run of the
// source (and so refuse a dirty tree): --fresh, no saved run, or one of
// another source. A saved run of this source is the engine's to judge (it
// resumes it, or starts anew when a finished one has work it never saw).
func (o *Options) surelyNew(p engine.Paths, info engine.SourceInfo) bool {
	saved, _, err := engine.LoadOrRebuildState(p)
	if err != nil {
		return false // the engine says what is wrong with it
	}
	return o.Fresh || saved == nil || saved.Source != info.Kind || saved.SourcePath != info.Path
}

// promptPaths are where the engine looks for the prompt template, first
// found first: --prompt, else the run folder's PROMPT.md, else
// .ralph/PROMPT.md then PROMPT.md (then its built-in one).
func (o *Options) promptPaths(root, runDir string) []string {
	switch {
	case o.Prompt != "":
		return []string{o.Prompt}
	case runDir != "":
		return []string{filepath.Join(runDir, runfolder.Prompt)}
	}
	return []string{filepath.Join(root, ".ralph", "PROMPT.md"), filepath.Join(root, "PROMPT.md")}
}

// openRunFolder checks RUN_DIR is Ralph-ready, points the run's PRD,
// transcripts and summary into it, reads its orchestration (the run folder's
// cadence) and keeps ralph's files there out of git.
func (o *opener) openRunFolder(ctx context.Context, root string, repo *git.Repo, paths *engine.Paths) (string, *runfolder.OrchestrationFile, error) {
	rd, err := filepath.Abs(o.RunDir)
	if err != nil {
		return "", nil, err
	}
	if st, err := os.Stat(rd); err != nil || !st.IsDir() {
		return "", nil, usage.Errorf("run folder %s does not exist", o.RunDir)
	}
	if !o.NoLint {
		if problems := runfolder.Lint(root, rd); len(problems) > 0 {
			var lines []string
			for _, p := range problems {
				lines = append(lines, "  "+p.String())
			}
			return "", nil, usage.Errorf("%s is not Ralph-ready:\n%s\n(fix it, see `ralph runs lint`, or run it anyway with --no-lint)", o.RunDir, strings.Join(lines, "\n"))
		}
	}
	if o.PRD == "" {
		o.PRD = filepath.Join(rd, runfolder.PRDJSON)
	}
	// The agent's progress.md is its work (committed with the story);
	// ralph's log stays in .ralph. Transcripts and SUMMARY.md are
	// ralph's, written after a story's commit: kept out of git, so a
	// run never leaves them uncommitted in the tree.
	paths.Transcripts = filepath.Join(rd, runfolder.Transcripts)
	paths.Summary = filepath.Join(rd, runfolder.Summary)
	excluded := []string{paths.Transcripts + "/", paths.Summary}
	// orchestration.json schedules reviews among the workers (the
	// worker/reviewer cadence); its control files are ralph's and a person's,
	// never a story's work.
	orch, err := runfolder.ReadOrchestration(rd)
	if err != nil {
		return "", nil, usage.Errorf("%v", err)
	}
	if orch != nil {
		if o.Parallel > 1 {
			return "", nil, usage.Errorf("%s schedules reviews between worker iterations, one at a time: --parallel does not run with a cadence (remove it to run the stories in parallel)", filepath.Join(o.RunDir, runfolder.Orchestration))
		}
		if o.Tasks != "" || o.Pipeline != "" {
			return "", nil, usage.Errorf("%s schedules reviews among the stories of a PRD: not with --tasks or --pipeline", filepath.Join(o.RunDir, runfolder.Orchestration))
		}
		excluded = append(excluded, filepath.Join(rd, runfolder.LoopState), filepath.Join(rd, runfolder.Control), filepath.Join(rd, filepath.Dir(runfolder.WorkerResult))+"/")
	}
	for _, p := range excluded {
		suffix := ""
		if strings.HasSuffix(p, "/") {
			p, suffix = strings.TrimSuffix(p, "/"), "/"
		}
		if rel, err := filepath.Rel(root, p); err == nil && !strings.HasPrefix(rel, "..") {
			if err := repo.EnsureExcluded(ctx, "/"+filepath.ToSlash(rel)+suffix); err != nil {
				return "", nil, fmt.Errorf("listing %s in .git/info/exclude: %w", rel, err)
			}
		}
	}
	return rd, orch, nil
}

// RepoProgressFile is the progress file the agents keep in the
// repository under `progress: repo` (the bash Ralph's name).
const RepoProgressFile = "progress.txt"

// repoProgress is the repository's progress file, "" unless `progress: repo`.
func (o *Options) repoProgress() string {
	if o.Progress == "repo" {
		return RepoProgressFile
	}
	return ""
}

// agentsFile is the agents' instructions file whose codebase-patterns
// section the agents keep, "" unless `progress: agents-md`: CLAUDE.md
// when the run's agent is Claude Code (it reads no AGENTS.md), else
// AGENTS.md, which the other agent CLIs read.
func (o *Options) agentsFile() string {
	if o.Progress != "agents-md" {
		return ""
	}
	if o.Agent == "claude" {
		return "CLAUDE.md"
	}
	return "AGENTS.md"
}

// worktrees says the stories run in worktrees of their own and merge
// through the queue: with --parallel above 1, and on a coordinator at any
// --parallel (its workers' commits come into a story's own tree).
func (o *opener) worktrees() bool {
	return o.Parallel > 1 || (o.d.Remote != nil && o.Tasks == "" && o.Pipeline == "")
}

// checkSource checks what the flags ask of the opened source: --parallel
// runs a PRD in a clean tree, and a source with no gate runs only with
// --no-gates (a dry run warns).
func (o *opener) checkSource(root string, src engine.Source) error {
	info := src.Info()
	if o.worktrees() {
		if info.Kind != "prd" {
			return usage.Errorf("--parallel works with PRD runs; %s runs are sequential", info.Kind)
		}
		if o.AllowDirty {
			return usage.Errorf("--parallel merges in the main work tree, which must be clean: commit or stash instead of --allow-dirty")
		}
	}
	if info.Kind == "loop" {
		if !info.Gated {
			// A plain loop marks nothing passed: it may run on the
			// promise alone, but the user hears that plainly.
			fmt.Fprintf(o.d.ErrOut, "ralph: no gates: this loop stops when the agent says <promise>%s</promise>, on its word alone (add --gate NAME=COMMAND, or gates: in .ralph/config.yaml, to check its work after each iteration)\n", o.promise())
		}
		return nil
	}
	if !info.Gated && !o.NoGates {
		what := "quality_checks in " + RelOr(root, info.Path) + " and no story has checks"
		switch {
		case info.Kind == "tasks", o.Issues != "":
			what = "--gate (nor gates: in .ralph/config.yaml)"
		case o.Plan != "":
			what = "Validation Commands in " + o.Plan + ", --gate (nor gates: in .ralph/config.yaml)"
		}
		msg := fmt.Sprintf("no quality gate: there are no %s, so every %s would pass on the agent's word alone; add the commands that test your project (`ralph init` finds them) or give --no-gates to run anyway", what, info.ItemKind)
		if !o.DryRun {
			return usage.Errorf("%s", msg)
		}
		fmt.Fprintf(o.d.ErrOut, "ralph: warning: %s\n", msg)
	}
	return nil
}

// notifier is what --notify, --notify-command and the config's notify:
// section ask for (nil for none).
func (o *opener) notifier(paths engine.Paths) (*notifier, error) {
	runner := o.d.Runner
	errOut := o.d.ErrOut
	return newNotifier(o.NotifyTo, o.Notify, o.NotifyCommand, o.root, paths, runner,
		func(msg string) { fmt.Fprintf(errOut, "%s ralph: %s\n", time.Now().Format("15:04:05"), msg) })
}

// breakerFingerprint sums what a person changes to fix what opened the
// circuit breaker: the gate and check commands, the tree (HEAD and every
// change in it, ralph's own files left out) and ralph's config files. A
// start that finds another sum than the breaker kept makes it half-open.
func breakerFingerprint(root string, repo *git.Repo, commands []string) func(context.Context) string {
	return func(ctx context.Context) string {
		h := sha256.New()
		for _, c := range commands {
			fmt.Fprintf(h, "command %q\n", c)
		}
		for _, f := range []string{"config.yaml", "roles.yaml"} {
			b, _ := os.ReadFile(filepath.Join(root, ".ralph", f))
			fmt.Fprintf(h, "%s %x\n", f, sha256.Sum256(b))
		}
		head, _ := repo.Run(ctx, "rev-parse", "HEAD")
		status, _ := repo.Run(ctx, "status", "--porcelain", "--untracked-files=all")
		diff, _ := repo.Run(ctx, "diff", "--no-ext-diff", "HEAD")
		fmt.Fprintf(h, "head %s\nstatus %s\ndiff %s\n", head, status, diff)
		return hex.EncodeToString(h.Sum(nil))
	}
}

// promise is the completion promise the run asks for.
func (o *Options) promise() string {
	if o.Promise != "" {
		return o.Promise
	}
	return engine.DefaultPromise
}

// plainLoop reports whether the run is the plain Ralph loop over --prompt:
// `ralph loop FILE`, or --prompt with no other source and no prd.json.
func (o *Options) plainLoop(root string) bool {
	if o.PlainLoop {
		return true
	}
	if o.Prompt == "" || o.PRD != "" || o.Tasks != "" || o.Pipeline != "" || o.RunDir != "" {
		return false
	}
	_, err := os.Stat(filepath.Join(root, "prd.json"))
	return err != nil
}

// openLoop opens the plain loop: the prompt file's text every iteration,
// the --gate commands (or the config's gates:) after each.
func (o *opener) openLoop(root string, repo *git.Repo, gates gate.Runner) (*source.Loop, error) {
	if o.PRD != "" || o.Tasks != "" || o.Pipeline != "" || o.RunDir != "" {
		return nil, usage.Errorf("the plain loop runs one prompt: not with --prd, --tasks, --pipeline or a RUN_DIR")
	}
	text, err := os.ReadFile(o.Prompt)
	if err != nil {
		return nil, usage.Errorf("--prompt: %v", err)
	}
	if strings.TrimSpace(string(text)) == "" {
		return nil, usage.Errorf("%s is empty: the loop gives the agent this prompt every iteration", o.Prompt)
	}
	checks, err := ParseGates(o.Gates)
	if err != nil {
		return nil, err
	}
	limit := o.MaxIterations
	if limit <= 0 {
		limit = defaultLoopIterations
	}
	return &source.Loop{Root: root, Prompt: string(text), Checks: checks, Gates: gates, MaxIterations: limit, Git: repo, Commit: !o.NoCommit}, nil
}

// OpenSource opens the work o names in the repository at root (the
// gates it runs through gates), as a run would: `ralph doctor`'s look.
func OpenSource(ctx context.Context, o *Options, d Deps, root string, repo *git.Repo, gates gate.Runner) (engine.Source, error) {
	return (&opener{Options: o, d: d}).openSource(ctx, root, repo, gates)
}

// defaultLoopIterations bounds a plain loop without --max-iterations.
const defaultLoopIterations = 10

// openSource opens the work the flags name: a task tree, a pipeline, the
// plain loop over a prompt, or (the default) a PRD.
func (o *opener) openSource(ctx context.Context, root string, repo *git.Repo, gates gate.Runner) (engine.Source, error) {
	given := 0
	for _, s := range []string{o.PRD, o.Tasks, o.Pipeline, o.Issues, o.Plan} {
		if s != "" {
			given++
		}
	}
	if given > 1 {
		return nil, usage.Errorf("give one of --prd, --tasks, --pipeline, --issues, --plan")
	}
	if o.plainLoop(root) {
		return o.openLoop(root, repo, gates)
	}
	switch {
	case o.Tasks != "":
		if o.Interval <= 0 {
			return nil, usage.Errorf("--interval must be positive")
		}
		list, err := ParseGates(o.Gates)
		if err != nil {
			return nil, err
		}
		return source.OpenTasks(ctx, o.abs(o.Tasks), repo, root, gates, list)
	case o.Pipeline != "":
		return source.OpenPipeline(o.Pipeline, root, repo, gates.Proc, gates.Timeout)
	}
	p := o.PRD
	var err error
	switch {
	case o.Issues != "":
		if p, err = o.issuesSource(ctx, root, repo); err != nil {
			return nil, err
		}
	case o.Plan != "":
		if p, o.plan, err = o.planSource(ctx, root, repo); err != nil {
			return nil, err
		}
	}
	if p == "" {
		p = filepath.Join(root, "prd.json")
		if _, err := os.Stat(p); err != nil {
			return nil, usage.Errorf("no prd.json in %s: pass --prd FILE (create one with `ralph prd new`)", root)
		}
	}
	var src engine.Source
	if o.worktrees() {
		src, err = source.OpenParallelPRD(p, repo, gates)
	} else {
		src, err = source.OpenPRD(p, repo, gates)
	}
	if err == nil {
		mirrorPlan(src, o.plan)
	}
	return src, err
}

// summarizer is the agent that folds older progress entries into the
// codebase patterns: the run's own unless --summarizer names another.
func (o *Options) summarizer(run agent.Agent) (agent.Agent, string, error) {
	if o.Summarizer == "" {
		if o.SummarizerModel != "" {
			return run, o.SummarizerModel, nil
		}
		return run, o.Model, nil
	}
	a := o.AgentSpec
	a.Agent, a.AgentCmd, a.Model = o.Summarizer, o.SummarizerCmd, o.SummarizerModel
	if a.Agent == "cmd" && a.AgentCmd == "" {
		return nil, "", usage.Errorf("--summarizer cmd needs --summarizer-cmd (or summarizer_cmd in .ralph/config.yaml)")
	}
	ag, err := a.Build()
	if err != nil {
		return nil, "", usage.Errorf("--summarizer: %v", err)
	}
	return ag, a.Model, nil
}
