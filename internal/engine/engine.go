// Package engine is ralph's one state machine. Every driver (the process
// loop of `ralph run` and the Stop hook's Start/Step) goes through it; it
// depends on interfaces only (Source, agent.Agent, gate runner, VCS,
// Clock).
//
// One iteration (iteration.go): select → setup → prepare → prompt → agent →
// signals → verify → decide → persist; the decide step asks the run's
// deciders (internal/decide). Sequential mode is the scheduler with one
// worker.
package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ralph-loop/ralph/internal/agent"
	"github.com/ralph-loop/ralph/internal/gate"
	"github.com/ralph-loop/ralph/internal/judge"
	"github.com/ralph-loop/ralph/internal/land"
	"github.com/ralph-loop/ralph/internal/proc"
	"github.com/ralph-loop/ralph/internal/roles"
	"github.com/ralph-loop/ralph/internal/secret"
	"github.com/ralph-loop/ralph/internal/store"
	"github.com/ralph-loop/ralph/internal/usage"
)

// Clock is time, replaceable in tests.
type Clock interface {
	Now() time.Time
	Sleep(ctx context.Context, d time.Duration) error
}

// realClock is the wall clock.
type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }
func (realClock) Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Config is one run's settings (flags over config file over defaults),
// grouped by concern.
type Config struct {
	Paths  Paths
	Source Source
	Git    VCS
	Clock  Clock
	Agent  AgentConfig
	Prompt PromptConfig
	Limits Limits
	// RateLimit is how long the run waits when an agent hits its
	// provider's limit without saying until when.
	RateLimit RateLimitConfig
	Progress  ProgressConfig
	Start     StartConfig
	// Roles are the role texts and triggers in force (nil: no roles).
	Roles *roles.Set
	// Deciders are the rules with a say in an item's iterations besides
	// the gates, in the order they are asked (internal/decide: plan
	// approval, reviews, the council, test-fix re-runs).
	Deciders []Decider
	// Policy pins the rules that judge items for the whole run (nil: the
	// files are trusted as they are).
	Policy Policy
	// Judge is the run's one judge (internal/judge): every claim of every
	// driver is judged there, on exactly the tree that lands.
	Judge    Judge
	Parallel int // workers; 0 or 1 = sequential (the same scheduler)
	// Watch keeps the loop alive when nothing is ready: it polls the source
	// every Watch interval without running an agent (no tokens spent) until
	// work appears, .ralph/stop exists or ctx ends.
	Watch time.Duration
	// TrustMarks counts the items a person marked done in the source's
	// files (passes: true, a ticked box, an archived task) as passed
	// without a commit of ralph's that records them (--trust-marks). By
	// default such an item is ItemMarked: not run, not counted passed.
	TrustMarks bool
	// NoMask keeps secrets as they are in transcripts and everything else
	// ralph writes (by default env values named like secrets and key
	// shapes are masked: secret.Masker).
	NoMask  bool
	OnEvent func(Event)
}

// AgentConfig is the run's agent and what every agent run gets.
type AgentConfig struct {
	Default agent.Agent
	Name    string
	Model   string
	// For chooses the agent of an iteration on an item with a role (nil:
	// Default, Name and Model run every iteration).
	For func(it *Item, role string) (AgentChoice, error)
	Env []string // added to every agent's environment
}

// PromptConfig is what every iteration is told.
type PromptConfig struct {
	Paths   []string // the first that exists is the template; none: the built-in
	Text    string   // used instead of Paths when set (a template)
	Promise string   // "" = COMPLETE
}

// Limits bound a run; each stop has its reason.
type Limits struct {
	MaxIterations int // 0 = 10 × items
	MaxAttempts   int // 0 = 3
	// MaxItemIterations bounds the iterations on one item, work in
	// progress included (0 = DefaultMaxItemIterations).
	MaxItemIterations int
	IterationTimeout  time.Duration // 0 = 60 min
	MaxCost           float64
	MaxTokens         int64
	TranscriptMax     int64 // bytes per transcript; 0 = 50 MB
	BreakerThreshold  int   // 0 = off (the CLI defaults to 5)
	// BreakerCooldown: an open breaker is half-open at the next start
	// once this long has passed since it opened (0 = 30 min).
	BreakerCooldown time.Duration
	// AskTimeout: an agent's question (`ralph ask`) nobody answered this
	// long after it was asked stops waiting and its item goes on without
	// an answer (0 = it waits as long as the run runs).
	AskTimeout time.Duration
}

// RateLimitConfig: the first wait when no reset time is given doubles up
// to the cap.
type RateLimitConfig struct {
	Backoff time.Duration // 0 = 1 min
	MaxWait time.Duration // 0 = 30 min
	// MaxCallsPerHour, when set, holds an agent start back while that
	// many agents started in the last hour (a proactive limit).
	MaxCallsPerHour int
}

// ProgressConfig is progress memory: Budget is the progress digest's
// budget in tokens (0 = DefaultProgressBudget), a quarter for the codebase
// patterns, the rest for the newest entries. Summarizer, when set, folds
// the older entries into the patterns (memory.go); without it the older
// entries only leave the prompt.
type ProgressConfig struct {
	Budget          int
	Summarizer      agent.Agent
	SummarizerModel string
	// InRepo (`progress: repo`) is a progress file in the repository
	// (relative to its root, e.g. progress.txt) that the agents keep, as
	// the bash Ralph's progress.txt: its "Codebase Patterns" head and
	// newest entries are the prompt's memory, and it is committed with
	// each item's work (the gates judge it like any file), so a fresh
	// clone or another machine has it. ralph's own record stays in
	// .ralph/progress.md.
	InRepo string
	// AgentsFile (`progress: agents-md`) is the agents' instructions file
	// (AGENTS.md, or CLAUDE.md for Claude Code; relative to the root)
	// whose section between AgentsPatternsBegin and AgentsPatternsEnd
	// the agents keep as the codebase patterns: every agent CLI reads it
	// by itself, and it is committed with each item's work.
	AgentsFile string
}

// StartConfig is how a run begins: resumed or new.
type StartConfig struct {
	Fresh bool // start a new run even if the state is of the same source
	// Resume insists on resuming the saved run of this source, a completed
	// one included (which otherwise gives way to a new run when the source
	// has unfinished items).
	Resume       bool
	ResetBreaker bool // a resumed run starts with the circuit breaker closed
	AllowDirty   bool // a new run may start in a tree with uncommitted changes
	// Setup are the files ralph's own commands write into a repository
	// (repository-relative): a new run starts with them uncommitted and
	// never commits them (CheckStartTree).
	Setup []string
	// Fingerprint sums what a person changes to fix what opened the
	// breaker (the gate commands, the tree, the config): kept when the
	// breaker opens, a start that finds another sum makes it half-open.
	Fingerprint func(ctx context.Context) string
}

// DefaultPromise is the completion promise when none is given:
// <promise>COMPLETE</promise>.
const DefaultPromise = "COMPLETE"

func (c *Config) defaults() {
	if c.Limits.MaxAttempts <= 0 {
		c.Limits.MaxAttempts = 3
	}
	if c.Limits.IterationTimeout <= 0 {
		c.Limits.IterationTimeout = 60 * time.Minute
	}
	if c.Prompt.Promise == "" {
		c.Prompt.Promise = DefaultPromise
	}
	if c.Clock == nil {
		c.Clock = realClock{}
	}
	if c.Limits.BreakerCooldown <= 0 {
		c.Limits.BreakerCooldown = 30 * time.Minute
	}
	if c.RateLimit.Backoff <= 0 {
		c.RateLimit.Backoff = time.Minute
	}
	if c.RateLimit.MaxWait <= 0 {
		c.RateLimit.MaxWait = 30 * time.Minute
	}
	if c.Limits.TranscriptMax <= 0 {
		c.Limits.TranscriptMax = defaultTranscriptMax
	}
	if c.Progress.Budget <= 0 {
		c.Progress.Budget = defaultProgressBudget
	}
}

// Judge is the one judge of a run (internal/judge.Judge implements it):
// the engine hands it every claim and lands what it passed through the
// branch's lander.
type Judge interface {
	// Open readies it once the run is open (its dependency folders, the
	// run-wide gates on the base rev) and says what fails at the base.
	Open(ctx context.Context, runID, rev string, gates []gate.Gate, log io.Writer) (judge.Opened, error)
	// Begin pins an item's contract at its base before its agent runs,
	// and takes the refs as they are.
	Begin(ctx context.Context, item, base string, terms judge.Claim) (*judge.Contract, map[string]string)
	Judge(ctx context.Context, c *judge.Case) Verdict
	// Rejudge judges a case again whose place in the queue went stale.
	Rejudge(ctx context.Context, c *judge.Case) Verdict
	// RecordWork lands an iteration's unverified work (the plain loop).
	RecordWork(ctx context.Context, c *judge.Case, msg string) (string, error)
	// Lander is the owner of branch, made at known (the newest commit
	// landed there, "" the branch as it is). A branch found rewritten is
	// put back and report says so; with no report, it is left to the
	// judge's checks.
	Lander(ctx context.Context, branch, known string, report func(string)) (*land.Lander, error)
	// Landed records that the tree of v landed as sha.
	Landed(item string, v Verdict, sha string)
}

// VCS is what the engine needs from version control (internal/git's Repo
// implements it); sources do their own branching and committing.
type VCS interface {
	EnsureExcluded(ctx context.Context, pattern string) error
	// Changed lists changed and untracked paths in the tree at dir.
	Changed(ctx context.Context, dir string, skip ...string) ([]string, error)
	HeadOf(ctx context.Context, dir string) (string, error)
	// CommitsSince counts the commits on dir's HEAD since base.
	CommitsSince(ctx context.Context, dir, base string) (int, error)
	// RemoveStaleLocks removes git's lock files that no live process has
	// open (left by a git that died); kept are the ones it could not tell.
	RemoveStaleLocks(ctx context.Context) (removed, kept []string, err error)
}

// Outcome is how a run ended.
type Outcome struct {
	Status string
	Reason string
	State  *State
}

// Engine runs a loop.
type Engine struct {
	cfg       Config
	box       *stateBox
	template  string
	tmplFrom  string
	backoffMu sync.Mutex
	backoff   time.Duration
	watching  bool
	// The questions' bookkeeping (ask.go): answers announced, forged ones
	// reported, and whether the idle wait for answers was said.
	askMu    sync.Mutex
	told     map[string]bool
	forged   map[string]bool
	awaiting bool
	mask     *secret.Masker
	slots    *agentSlots
	// landers own the branches work lands on, one each (land.Lander).
	landMu  sync.Mutex
	landers map[string]*land.Lander
	// distrusted are the items a resumed state said were passed but the
	// source (the repository) did not agree; notes are what the source's
	// first Sync found about other items (a stranded claim). open reports
	// both.
	distrusted []string
	notes      []Event
	stateNote  string // how a corrupt state.json was dealt with
	mem        *memory
	// itemsSynced is the ItemsVersion (see ItemsVersioned) the state's
	// items were last synced at, and how many there were then.
	itemsSynced struct {
		ok      bool
		version uint64
		n       int
	}
}

// New validates cfg.
func New(cfg Config) (*Engine, error) {
	cfg.defaults()
	if cfg.Source == nil || cfg.Git == nil || cfg.Judge == nil {
		return nil, errors.New("engine: a source, version control and a judge are required")
	}
	text, from, err := loadPromptTemplate(cfg.Prompt.Paths...)
	if err != nil {
		return nil, err
	}
	if cfg.Prompt.Text != "" {
		text, from = cfg.Prompt.Text, "the loop prompt"
	}
	if err := checkTemplate(from, text); err != nil {
		return nil, usage.Errorf("%v", err)
	}
	mask := secret.FromEnv(cfg.Agent.Env...)
	if cfg.NoMask {
		mask = secret.Off()
	}
	return &Engine{cfg: cfg, template: text, tmplFrom: from, slots: newAgentSlots(cfg.Parallel), mask: mask, mem: newMemory(cfg.Progress.Budget)}, nil
}

func newRunID(now time.Time) string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return now.UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b)
}

// Run runs the loop until the work is done or a limit stops it. ctx
// cancellation (SIGINT) persists state and returns StatusInterrupted.
func (e *Engine) Run(ctx context.Context) (Outcome, error) {
	cfg := &e.cfg
	if cfg.Agent.Default == nil {
		return Outcome{}, errNoAgent
	}
	lock, resumed, err := e.open(ctx)
	if err != nil {
		return Outcome{}, err
	}
	defer e.release(lock)
	// Orphans of the agents and gates (setsid, double fork) stay ralph's
	// descendants, so each iteration's leftovers can be found (Linux).
	proc.BecomeSubreaper()
	if resumed {
		snap := e.box.snapshot()
		e.emit(Event{Type: "run_resumed", Message: fmt.Sprintf("resuming run %s at iteration %d", e.runID(), snap.Iteration), Data: runFacts(snap)})
	} else {
		var n int
		e.box.read(func(st *State) { n = st.Total() })
		e.emit(Event{Type: "run_started", Message: fmt.Sprintf("run %s over %s (%s) with agent %s", e.runID(), e.info().Path, Plural(n, e.info().ItemKind), cfg.Agent.Name), Data: runFacts(e.box.snapshot())})
	}

	// Finish iterations a crash left half-done before anything new starts:
	// first stop what the crashed run left running, then clear the git
	// locks its git processes died holding, then conclude its iterations.
	e.killOrphans()
	e.removeStaleLocks(ctx)
	if err := e.openJudge(ctx); err != nil {
		return e.stop(StatusError, err.Error()), err
	}
	defer e.closeLanders()
	if err := e.recover(ctx); err != nil {
		return e.stop(StatusError, err.Error()), err
	}

	return e.schedule(ctx)
}

// open takes the run lock and loads or starts the run's state; every
// driver begins here.
func (e *Engine) open(ctx context.Context) (*store.RunLock, bool, error) {
	cfg := &e.cfg
	// ralph's folder holds transcripts and state: its owner's alone.
	if err := os.MkdirAll(cfg.Paths.Dir, 0o700); err != nil {
		return nil, false, err
	}
	if err := os.Chmod(cfg.Paths.Dir, 0o700); err != nil {
		return nil, false, err
	}
	lock, err := store.TryLock(cfg.Paths.Lock)
	if err != nil {
		return nil, false, err
	}
	for _, pattern := range []string{"/.ralph/", "/" + RootStopFile} {
		if err := cfg.Git.EnsureExcluded(ctx, pattern); err != nil {
			lock.Unlock()
			return nil, false, fmt.Errorf("listing %s in .git/info/exclude: %w", pattern, err)
		}
	}
	st, resumed, err := e.loadOrStart(ctx)
	var pinnedAt time.Time
	if err == nil && cfg.Policy != nil {
		pinnedAt, err = cfg.Policy.Open(st.RunID, resumed)
	}
	if err != nil {
		lock.Unlock()
		return nil, false, err
	}
	e.box = newStateBox(st, cfg.Paths.State, cfg.Clock.Now)
	removeOldJournal(cfg.Paths.State)
	if err := e.box.update(func(st *State) {
		st.Status, st.StopReason, st.TranscriptMax = StatusRunning, "", cfg.Limits.TranscriptMax
		if !pinnedAt.IsZero() {
			st.PolicyPinnedAt = pinnedAt
		}
	}); err != nil {
		lock.Unlock()
		return nil, false, err
	}
	for _, id := range e.distrusted {
		e.emit(Event{Type: "tamper_detected", Item: id, Message: fmt.Sprintf("%s: %s", id, st.Items[id].Reason)})
	}
	if e.stateNote != "" {
		e.emit(Event{Type: "state_rebuilt", Message: e.stateNote})
	}
	for _, ev := range e.notes {
		if !slices.Contains(e.distrusted, ev.Item) {
			e.emit(ev)
		}
	}
	return lock, resumed, nil
}

// release writes the state (fsynced) and gives the run lock up: every
// driver ends here.
func (e *Engine) release(lock *store.RunLock) {
	if err := e.box.close(); err != nil {
		e.emit(Event{Type: "source_error", Message: "saving the run's state: " + err.Error()})
	}
	lock.Unlock()
}

func (e *Engine) info() SourceInfo { return e.cfg.Source.Info() }

// initialState is the state a run begins with, writing nothing: the saved
// state when it is of the same source (resumed), else a new one (old is
// then the saved state of another run, if any).
func (e *Engine) initialState(ctx context.Context) (st *State, resumed bool, old *State, err error) {
	cfg := &e.cfg
	info := e.info()
	saved, note, err := loadOrRebuild(cfg.Paths)
	var ce *corruptStateError
	if errors.As(err, &ce) && cfg.Start.Fresh {
		saved, err = nil, nil // a new run: the corrupt file is set aside below
	}
	if err != nil {
		return nil, false, nil, fmt.Errorf("%w\nralph keeps the file; `ralph run --fresh` sets it aside and starts a new run", err)
	}
	if note != "" || ce != nil {
		aside, aerr := setAsideCorrupt(cfg.Paths.State, cfg.Clock.Now())
		if aerr != nil {
			return nil, false, nil, fmt.Errorf("setting the corrupt %s aside: %w", cfg.Paths.State, aerr)
		}
		if note == "" {
			note = fmt.Sprintf("%v; a new run starts", ce)
		}
		e.stateNote = note + " (the corrupt file is kept as " + filepath.Base(aside) + ")"
	}
	same := saved != nil && !cfg.Start.Fresh && saved.Source == info.Kind && saved.SourcePath == info.Path
	var finished []byte // a completed run, as saved, in case it gives way
	if same && saved.Status == StatusComplete && len(saved.Current) == 0 && !cfg.Start.Resume {
		if finished, err = json.Marshal(saved); err != nil {
			return nil, false, nil, err
		}
	}
	if cfg.Start.Resume && !same {
		why := "there is no saved run"
		if saved != nil {
			why = fmt.Sprintf("the saved run %s is of %s %s", saved.RunID, saved.Source, relTo(cfg.Paths.Root, saved.SourcePath))
		}
		return nil, false, nil, usage.Errorf("--resume: %s, so there is nothing of %s to resume (drop --resume to start a new run)", why, relTo(cfg.Paths.Root, info.Path))
	}
	if same {
		claimed := saved.Passed()
		reasons := reasonsOf(saved)
		if err := e.syncState(saved, SyncResume); err != nil {
			return nil, false, nil, err
		}
		e.noteReasons(saved, reasons)
		e.distrusted = e.distrusted[:0]
		for _, id := range saved.Order {
			// (an item passed on trust that is marked again, trust not
			// given this time, was never ralph's claim)
			if claimed[id] && !saved.Items[id].Done() {
				e.distrusted = append(e.distrusted, id)
			}
		}
		if finished != nil {
			if passed, _, total := saved.Counts(); passed+len(saved.Marked()) < total {
				// A finished run is not resumed forever: the source has
				// work it never saw (new stories, reopened ones).
				old := new(State)
				if err := json.Unmarshal(finished, old); err != nil {
					return nil, false, nil, err
				}
				e.distrusted = e.distrusted[:0]
				st, err := e.newState()
				e.notes = append(e.notes, Event{Type: "source_note", Message: fmt.Sprintf("run %s completed; %d of %d items are unfinished now, so a new run starts (--resume continues the old one)", old.RunID, total-passed, total)})
				return st, false, old, err
			}
		}
		if cfg.Limits.MaxIterations > 0 {
			saved.MaxIterations = cfg.Limits.MaxIterations
		}
		saved.MaxAttempts = cfg.Limits.MaxAttempts
		e.recordLimits(saved)
		if cfg.Start.ResetBreaker && saved.Breaker != (Breaker{}) {
			saved.Breaker = Breaker{}
			e.notes = append(e.notes, Event{Type: "source_note", Message: "circuit breaker reset (--reset-breaker)"})
		} else if why := e.halfOpen(ctx, saved); why != "" {
			e.notes = append(e.notes, Event{Type: "breaker_half_open", Message: "circuit breaker half-open: " + why + "; one iteration runs, and a success closes it"})
		}
		return saved, true, nil, nil
	}
	st, err = e.newState()
	return st, false, saved, err
}

// newState is the state of a new run of the source.
func (e *Engine) newState() (*State, error) {
	cfg := &e.cfg
	info := e.info()
	now := cfg.Clock.Now().UTC()
	st := &State{
		Version: 1, RunID: newRunID(now), Source: info.Kind, SourcePath: info.Path,
		Agent: cfg.Agent.Name, Status: StatusRunning, StartedAt: now, UpdatedAt: now,
		MaxAttempts: cfg.Limits.MaxAttempts, Items: map[string]*ItemState{},
	}
	if err := e.syncState(st, SyncNewRun); err != nil {
		return nil, err
	}
	e.noteReasons(st, nil)
	// A PRD's feature branch (every story's), for status and the MCP
	// status tool.
	if info.Kind == "prd" {
		for _, it := range cfg.Source.Items() {
			if it.Branch != "" {
				st.Branch = it.Branch
				break
			}
		}
	}
	st.MaxIterations = cfg.Limits.MaxIterations
	if st.MaxIterations <= 0 {
		st.MaxIterations = 10 * st.Total()
	}
	e.recordLimits(st)
	return st, nil
}

// recordLimits keeps in the state the concurrency and the budget the run
// is started with, for the readers of its state (the dashboards).
func (e *Engine) recordLimits(st *State) {
	st.Parallel = max(e.cfg.Parallel, 1)
	st.MaxCost, st.MaxTokens = e.cfg.Limits.MaxCost, e.cfg.Limits.MaxTokens
}

// loadOrStart resumes the saved state when it is of the same source (a
// finished run included: it ends at once as complete), or starts a new run
// after checking the tree is clean; the state of another source's run, or
// any with --fresh, is moved to .ralph/runs/<run id>/state.json first.
func (e *Engine) loadOrStart(ctx context.Context) (*State, bool, error) {
	cfg := &e.cfg
	st, resumed, old, err := e.initialState(ctx)
	if err != nil || resumed {
		return st, resumed, err
	}
	tree, err := CheckStartTree(ctx, cfg.Git, cfg.Paths.Root, e.info(), cfg.Start.Setup)
	if err != nil {
		return nil, false, err
	}
	if !cfg.Start.AllowDirty {
		if err := tree.Err(); err != nil {
			return nil, false, err
		}
	}
	// What the run never commits: ralph's setup files, and with
	// --allow-dirty the user's changes.
	st.Preexisting = tree.Kept
	if cfg.Start.AllowDirty {
		st.Preexisting = append(st.Preexisting, tree.Refused...)
	}
	if old != nil {
		dir := filepath.Join(cfg.Paths.Dir, "runs", old.RunID)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, false, err
		}
		// The old run's state; then its files go (a crash in between
		// archives it again).
		data, err := json.MarshalIndent(old, "", "  ")
		if err != nil {
			return nil, false, err
		}
		if err := store.WriteFile(filepath.Join(dir, "state.json"), append(data, '\n'), 0o600); err != nil {
			return nil, false, err
		}
		// Its events and transcripts go with it, so the new run's numbers
		// start in files of their own.
		if err := archiveRunFiles(dir, cfg.Paths); err != nil {
			return nil, false, err
		}
		if err := removeState(cfg.Paths.State); err != nil {
			return nil, false, err
		}
	}
	return st, false, nil
}

// archiveRunFiles moves the event log and the transcripts of the run
// being replaced into its folder dir (.ralph/runs/<run id>). Each is one
// rename; one already moved (a crash after it, before the state went) is
// skipped, and a name already taken in dir gets a numbered one.
func archiveRunFiles(dir string, p Paths) error {
	for _, f := range []struct{ from, name string }{{p.Events, "events.jsonl"}, {p.Transcripts, "transcripts"}} {
		if _, err := os.Lstat(f.from); errors.Is(err, os.ErrNotExist) {
			continue
		} else if err != nil {
			return err
		}
		to := filepath.Join(dir, f.name)
		for n := 2; ; n++ {
			if _, err := os.Lstat(to); errors.Is(err, os.ErrNotExist) {
				break
			}
			to = filepath.Join(dir, fmt.Sprintf("%s.%d", f.name, n))
		}
		if err := os.Rename(f.from, to); err != nil {
			return fmt.Errorf("keeping the old run's %s: %w", f.name, err)
		}
	}
	return nil
}

func reasonsOf(st *State) map[string]string {
	m := make(map[string]string, len(st.Items))
	for id, is := range st.Items {
		m[id] = is.Reason
	}
	return m
}

// noteReasons keeps, to report when the run opens, what the source's first
// Sync said about items that are not passed (before: their reasons until
// then).
func (e *Engine) noteReasons(st *State, before map[string]string) {
	e.notes = e.notes[:0]
	for _, id := range st.Order {
		if is := st.Items[id]; is.Status != ItemPassed && is.Status != ItemMarked && is.Reason != "" && is.Reason != before[id] {
			e.notes = append(e.notes, Event{Type: "source_note", Item: id, Message: fmt.Sprintf("%s: %s", id, is.Reason)})
		}
	}
	e.notes = append(e.notes, e.marksNote(st)...)
}

// marksNote says, once, which items are marked done by hand with nothing
// of ralph's that proves them, or that the run trusts them.
func (e *Engine) marksNote(st *State) []Event {
	kind := e.info().ItemKind
	if marked := st.Marked(); len(marked) > 0 {
		what := "never counted as passed: ralph verifies them (an agent works on each, and it passes only on evidence)"
		if !MarksWorked(st.Source) {
			what = "neither run nor counted as passed (" + verifyMarks(st.Source) + ")"
		}
		return []Event{{Type: "marks_unverified", Message: fmt.Sprintf("%s %s, %s: %s; --trust-marks counts them as passed",
			Plural(len(marked), kind), MarkedLabel, what, reasonsList(st, marked)), Data: map[string]any{"items": marked}}}
	}
	var trusted []string
	for _, id := range st.Order {
		if is := st.Items[id]; is.Status == ItemPassed && is.Reason == TrustedReason {
			trusted = append(trusted, id)
		}
	}
	if len(trusted) > 0 {
		return []Event{{Type: "marks_trusted", Message: fmt.Sprintf("%s marked done by hand counted as passed without verification (--trust-marks): %s",
			Plural(len(trusted), kind), idList(trusted)), Data: map[string]any{"items": trusted}}}
	}
	return nil
}

// reasonsList is "ID: reason; …" for the first ids (the rest counted).
func reasonsList(st *State, ids []string) string {
	var parts []string
	for _, id := range ids[:min(len(ids), 5)] {
		parts = append(parts, id+": "+st.Items[id].Reason)
	}
	if len(ids) > 5 {
		parts = append(parts, fmt.Sprintf("and %d more", len(ids)-5))
	}
	return strings.Join(parts, "; ")
}

// idList is "A, B, C" for the first ids (the rest counted).
func idList(ids []string) string {
	if len(ids) <= 10 {
		return strings.Join(ids, ", ")
	}
	return strings.Join(ids[:10], ", ") + fmt.Sprintf(" and %d more", len(ids)-10)
}

// syncState lets the source bring st up to date, then makes st know every
// item of the source in its order (a PRD edited between runs may have new
// stories; a task tree grows), and counts marks as the run is told to.
func (e *Engine) syncState(st *State, why SyncReason) error {
	if err := e.cfg.Source.Sync(st, why); err != nil {
		return err
	}
	e.syncItems(st, why)
	e.applyTrust(st)
	return nil
}

// applyTrust counts the items marked done by hand as passed when the run
// trusts marks, and as marked when it does not (a run resumed without
// --trust-marks no longer counts what an earlier start trusted).
func (e *Engine) applyTrust(st *State) {
	for _, is := range st.Items {
		switch {
		case e.cfg.TrustMarks && is.Status == ItemMarked:
			is.Status, is.Reason = ItemPassed, TrustedReason
		case !e.cfg.TrustMarks && is.Status == ItemPassed && is.Reason == TrustedReason:
			is.Status, is.Reason = ItemMarked, "marked done by hand; an earlier start trusted it (--trust-marks), this one does not"
		}
	}
}

func (e *Engine) syncItems(st *State, why SyncReason) {
	if v, ok := e.cfg.Source.(itemsVersioned); ok {
		version := v.ItemsVersion()
		steady := why == syncIteration || why == SyncPoll // the same state as at the last sync
		if steady && e.itemsSynced.ok && e.itemsSynced.version == version && e.itemsSynced.n == len(st.Order) {
			syncUntracked(st, e.cfg.Source)
			return
		}
		defer func() { e.itemsSynced.ok, e.itemsSynced.version, e.itemsSynced.n = true, version, len(st.Order) }()
	}
	items := e.cfg.Source.Items()
	order := make([]string, len(items))
	for i, it := range items {
		order[i] = it.ID
		if is := st.Items[it.ID]; is == nil || is.Title != it.Title {
			st.Item(it.ID).Title = it.Title
		}
	}
	st.Order = order
	syncUntracked(st, e.cfg.Source)
}

func syncUntracked(st *State, src Source) {
	st.Untracked = 0
	if sp, ok := src.(sparse); ok {
		st.Untracked = sp.Untracked()
	}
}

func relTo(root, p string) string {
	if r, err := filepath.Rel(root, p); err == nil {
		return r
	}
	return p
}

func (e *Engine) stop(status, reason string) Outcome {
	var out *State
	opened := status == StatusBlocked && e.breakerOpen(e.box.snapshot())
	fp := ""
	if opened && e.cfg.Start.Fingerprint != nil {
		fp = e.cfg.Start.Fingerprint(context.Background())
	}
	_ = e.box.updateDurable(func(st *State) {
		st.Status = status
		st.StopReason = reason
		if opened && st.Breaker.OpenedAt.IsZero() {
			st.Breaker.OpenedAt, st.Breaker.Fingerprint = e.cfg.Clock.Now().UTC(), fp
		}
		// Nothing runs any more; the Current entries stay for a resume.
		for _, is := range st.Items {
			if is.Status == ItemRunning {
				is.Status = ItemPending
			}
		}
		out = st
	})
	if err := e.cfg.Source.Close(e.box.snapshot()); err != nil {
		e.emit(Event{Type: "source_error", Message: "tidying up after the run: " + err.Error()})
	}
	e.emit(Event{Type: "run_stopped", Message: reason, Data: map[string]any{"status": status}})
	return Outcome{Status: status, Reason: reason, State: out}
}

func (e *Engine) emit(ev Event) {
	if ev.Time.IsZero() {
		ev.Time = e.cfg.Clock.Now().UTC()
	}
	ev.Message = e.mask.String(ev.Message)
	if e.box != nil {
		e.box.read(func(st *State) {
			ev.RunID = st.RunID
		})
	}
	_ = store.AppendJSONL(e.cfg.Paths.Events, ev)
	if e.cfg.OnEvent != nil {
		e.cfg.OnEvent(ev)
	}
	e.reportLinks()
}

// reportLinks reports the symbolic links ralph found in its own folder
// and removed instead of writing through them (store.OpenOwn): someone
// else put them there, to make ralph write outside the repository.
func (e *Engine) reportLinks() {
	for _, l := range store.ReplacedLinks() {
		e.emit(Event{Type: "tamper_detected", Message: fmt.Sprintf("%s was a symbolic link to %s that ralph did not make: ralph wrote its own file in its place and left %s untouched", relTo(e.cfg.Paths.Root, l.Path), l.Target, l.Target)})
	}
}

// killOrphans stops what a supervisor killed with -9 left running, before
// anything touches its trees: the agents' process groups, and every other
// process carrying the run's id (gates, and children that left the group).
func (e *Engine) killOrphans() {
	var cur []*Current
	e.box.read(func(st *State) { cur = append(cur, st.Current...) })
	for _, c := range cur {
		if proc.KillGroupIf(c.AgentPID, "RALPH_RUN_ID="+e.runID()) {
			e.emit(Event{Type: "orphan_killed", Item: c.Item, Message: fmt.Sprintf("killed the agent (process group %d) left running by the crashed run", c.AgentPID)})
		}
	}
	if pids := proc.KillTagged("RALPH_RUN_ID="+e.runID(), true); len(pids) > 0 {
		e.emit(Event{Type: "orphan_killed", Message: fmt.Sprintf("killed %d more process(es) the crashed run left running (gates, escaped children): pids %v", len(pids), pids)})
	}
}

// removeStaleLocks clears git lock files no live process holds (a git
// killed mid-commit leaves index.lock, and every later git command would
// fail until a person deleted it).
func (e *Engine) removeStaleLocks(ctx context.Context) {
	removed, kept, err := e.cfg.Git.RemoveStaleLocks(ctx)
	for _, l := range removed {
		e.emit(Event{Type: "stale_lock_removed", Message: fmt.Sprintf("removed %s, left by a git process that died (no live process had it open)", l)})
	}
	for _, l := range kept {
		e.emit(Event{Type: "lock_kept", Message: fmt.Sprintf("%s is held by a running process (or this system cannot tell); if git fails on it and no git runs, remove it", l)})
	}
	if err != nil {
		e.emit(Event{Type: "source_error", Message: "looking for stale git locks: " + err.Error()})
	}
}

// recover finishes iterations that a crash interrupted.
func (e *Engine) recover(ctx context.Context) error {
	var cur []*Current
	e.box.read(func(st *State) { cur = append(cur, st.Current...) })
	// Every commit that landed is recorded before anything is judged
	// again: an item verified again here may be committed at once, and its
	// commit must already count them (a PRD's write-back of every passed
	// story), and a source readies its trees knowing which items landed.
	var again []*Current
	for _, c := range cur {
		it := e.itemByID(c.Item)
		if it == nil {
			_ = e.box.update(func(st *State) { st.dropCurrent(c.Item) })
			continue
		}
		if c.Phase == PhaseCommit {
			commit, done, err := e.cfg.Source.Recover(ctx, it, e.box.snapshot())
			if err != nil {
				return err
			}
			if done {
				e.emit(Event{Type: "recovered", Item: it.ID, Iteration: c.Iteration, Message: fmt.Sprintf("%s was committed as %s before the crash", it.ID, ShortSHA(commit))})
				e.markPassed(it, c.Iteration, commit, "passed (recovered after crash)")
				continue
			}
		}
		again = append(again, c)
	}
	for _, c := range again {
		it := e.itemByID(c.Item)
		switch c.Phase {
		case PhaseCommit, PhaseVerify:
			e.emit(Event{Type: "recovered", Item: it.ID, Iteration: c.Iteration, Message: fmt.Sprintf("iteration %d of %s was interrupted while verifying; verifying again", c.Iteration, it.ID)})
			if err := e.reverify(ctx, it, c); err != nil {
				return err
			}
		default:
			e.emit(Event{Type: "recovered", Item: it.ID, Iteration: c.Iteration, Message: fmt.Sprintf("iteration %d of %s was interrupted; running it again (no attempt spent)", c.Iteration, it.ID)})
			_ = e.box.update(func(st *State) {
				st.dropCurrent(c.Item)
				st.Refunds++
				if is := st.Items[c.Item]; is != nil && is.Status == ItemRunning {
					is.Status = ItemPending
				}
			})
		}
	}
	return nil
}

func (e *Engine) itemByID(id string) *Item {
	if sc, ok := e.cfg.Source.(scheduled); ok {
		if it := sc.Lookup(id); it != nil {
			return it
		}
	}
	for _, it := range e.cfg.Source.Items() {
		if it.ID == id {
			it := it
			return &it
		}
	}
	return nil
}

// ShortSHA is a commit id as messages show it (8 characters).
func ShortSHA(sha string) string {
	if len(sha) > 8 {
		return sha[:8]
	}
	return sha
}

// Plural is "1 story", "2 stories": n and word, plural when n is not 1.
func Plural(n int, word string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, word)
	}
	if strings.HasSuffix(word, "y") {
		return fmt.Sprintf("%d %sies", n, strings.TrimSuffix(word, "y"))
	}
	return fmt.Sprintf("%d %ss", n, word)
}

func (e *Engine) runID() string {
	var id string
	e.box.read(func(st *State) { id = st.RunID })
	return id
}
