package engine

import (
	"context"

	"github.com/ralph-loop/ralph/internal/agent"
	"github.com/ralph-loop/ralph/internal/gate"
)

// Item is one unit of work: a PRD story, a task, a pipeline stage.
type Item struct {
	ID          string
	Title       string
	Description string
	Criteria    []string
	Kind        string // story | task | stage
}

// Attempt is what the engine hands a source to judge one iteration.
type Attempt struct {
	Item      *Item
	Dir       string // work tree the agent ran in
	Result    agent.Result
	Prompt    string
	Promise   string
	Claimed   bool // set by the engine from the promise; a source may add its own signals
	Learnings []string
	Log       *Transcript
	// Files are the paths the iteration changed, when a Stager recorded
	// them while staging (nil otherwise: the engine asks git).
	Files []string
}

// Verdict is a source's judgement of an iteration.
type Verdict struct {
	Passed   bool
	Claimed  bool
	Gates    []gate.Result
	Summary  string // one line for output and state
	Failure  string // retry context for the next prompt (empty on pass)
	Tampered []string
}

// Source is a work source. The engine owns the loop (limits, prompts,
// agents, retries, state, events); a source owns what its work means:
// which item is next, which tree it runs in, how "done" is checked and
// recorded.
type Source interface {
	Kind() string
	Path() string
	// Items lists every item in display order.
	Items() []Item
	// Next returns the best ready item not in busy, or nil when none is
	// ready (the engine then decides complete vs blocked from state).
	Next(st *State, busy map[string]bool) (*Item, error)
	// Prepare readies the tree for an iteration on it and returns the dir.
	Prepare(ctx context.Context, it *Item, st *State) (string, error)
	// Verify judges an iteration: the claim, the gates, control-plane
	// integrity.
	Verify(ctx context.Context, a *Attempt, st *State) Verdict
	// Accept records a passed item (commit, merge, write-back) and returns
	// the commit that holds it.
	Accept(ctx context.Context, a *Attempt, v Verdict, st *State) (string, error)
	// Block gives up on an item after its attempts.
	Block(ctx context.Context, it *Item, st *State, reason string) error
	// Recover finishes an iteration that was in its commit phase when the
	// process died: it returns the commit if the item was already recorded.
	Recover(ctx context.Context, it *Item, st *State) (commit string, done bool, err error)
	// PromptData fills the source's fields of the prompt variables.
	PromptData(it *Item, d *PromptData)
}

// Seeder is implemented by sources that know items already done before
// the first run (a PRD whose stories were passed by hand).
type Seeder interface {
	Seed(st *State)
}

// Reloader is implemented by sources whose file others append to while the
// loop runs (tasks.jsonl in watch mode): Reload re-reads it.
type Reloader interface {
	Reload() error
}

// AttemptLimiter is implemented by sources whose items have their own
// attempt caps (a pipeline stage's max_iterations); 0 means the run's.
type AttemptLimiter interface {
	MaxAttempts(itemID string) int
}

// StopObserver is told the final state when a run stops (a source that
// mirrors state into its own file, like pipeline.json).
type StopObserver interface {
	Stopped(st *State)
}

// StateSyncer is implemented by sources whose items change during a run
// (subtasks split off, tasks appended, archived by hand): after every
// iteration the engine lets the source bring the item states up to date.
type StateSyncer interface {
	SyncState(st *State)
}

// ControlFiler names files the source owns besides Path (e.g.
// tasks-done.jsonl): the dirty-tree check ignores them.
type ControlFiler interface {
	ControlFiles() []string
}

// Stager is implemented by sources that prepare a verified item for the
// merge queue (commit the worktree's work on its branch) outside the queue,
// so only the merge itself is serialized.
// Stage sets a.Files to what it recorded. Stages reports whether this run
// stages at all (a source may stage only in some modes).
type Stager interface {
	Stages() bool
	Stage(ctx context.Context, a *Attempt, v Verdict) error
}

// BaseKnower is implemented by sources that know the commit an item's tree
// was cut at once Prepare made it (a worktree cut at a known tip), so the
// engine records the item's base without a git call; "" when unknown.
type BaseKnower interface {
	PreparedBase(id string) string
}

// Cleaner is implemented by sources with per-item leftovers to tidy after
// an item passed (a worktree to park for the next item). It runs after the
// item is recorded as passed, so its dependents do not wait for it.
type Cleaner interface {
	Cleanup(ctx context.Context, a *Attempt)
}
