package engine

import (
	"context"

	"github.com/ralph-loop/ralph/internal/agent"
	"github.com/ralph-loop/ralph/internal/judge"
)

// Label names an item in a message: its kind and id ("story US-001"),
// or its kind alone when the id says no more (a plain loop's one item,
// "loop", not "loop loop").
func (it *Item) Label() string {
	if it.ID == "" || it.ID == it.Kind {
		return it.Kind
	}
	if it.Kind == "" {
		return it.ID
	}
	return it.Kind + " " + it.ID
}

// Item is one unit of work: a PRD story, a task, a pipeline stage. It
// carries everything the engine needs to run and bound it, so no source
// needs a side door into the engine.
type Item struct {
	ID          string
	Title       string
	Description string
	Criteria    []string
	Kind        string // story | task | stage | loop
	// Branch is the git branch the item's work lands on (a PRD's feature
	// branch, a task's own branch), for the prompt's {{.Branch}}.
	Branch string
	// MaxAttempts is the item's own attempt cap (a pipeline stage's
	// max_iterations); 0 means the run's --max-attempts.
	MaxAttempts int
	// Promise is the completion promise this item's prompt asks for when
	// it is not the run's (a pipeline stage whose exit is a promise).
	Promise string
	// Template, when set, is the item's own prompt text (a template over
	// PromptData); the engine renders it as the item's description.
	Template string
	// Agent and Model are the item's own agent settings (a story's or a
	// task's agent and model fields): below the command line's flags,
	// above a role's and the config's.
	Agent string
	Model string
	// Critical items pass only with a council's majority (--council).
	Critical bool
	// Review names the role whose approval is the item's evidence (a
	// story a person marked as shown by review rather than a test).
	Review string
	// Role, when set, is the role of every iteration on the item (a run
	// folder's scheduled review), chosen by the source for RoleWhy. No
	// trigger is asked, no plan is asked for, and the source judges the
	// work by its own contract: the role's REVIEW: verdict is not read.
	// RoleText, when set, replaces the role's prompt (the source's
	// contract, which the role's own Output section would contradict).
	Role     string
	RoleWhy  string
	RoleText string
}

// SourceInfo describes a source once: what it is and which files it owns.
type SourceInfo struct {
	Kind     string // prd | tasks | pipeline | loop
	Path     string // the file the source reads (absolute)
	ItemKind string // story | task | stage | loop: what one item is called
	// ControlFiles are files the source owns besides Path (tasks-done.jsonl,
	// lock files): they are ralph's, never the user's dirty work.
	ControlFiles []string
	// Gated: some command can fail an item besides the agent's claim (a
	// quality gate, a story's checks, a stage's exit condition). A run
	// without one would pass items on the agent's word alone.
	Gated bool
	// Commands are the gate and check commands (each once), for the
	// preflight that looks for their programs before a run starts.
	Commands []string
	// PRDPath and TasksPath fill the prompt variables of the same names.
	PRDPath   string
	TasksPath string
}

// Workspace is the tree an iteration runs in, as Prepare made it.
type Workspace struct {
	Dir string
	// Base is the commit the tree was cut at, when the source knows it
	// without asking git (a worktree cut at a known tip); "" otherwise.
	Base string
	// Isolated: the tree is the item's own (a parallel PRD's worktree):
	// its work needs no agent slot while it waits to land.
	Isolated bool
	// Follow, when set, brings a checkout of the target branch along once
	// the item's commit landed on it (from old), before anything else
	// lands: the main tree the agent worked in takes the recorded index.
	Follow func(ctx context.Context, v Verdict, old, landed string) error
}

// Attempt is what the engine hands a source to read one iteration.
type Attempt struct {
	Item    *Item
	Dir     string // work tree the agent ran in
	Result  agent.Result
	Prompt  string
	Promise string
	Claimed bool // set by the engine from the promise; a source may add its own signals
	// Role is the iteration's role ("" for a worker iteration).
	Role string
	// Rejected holds a role's findings when its verdict did not approve
	// (it asked for changes, or a review that must approve gave none):
	// the item is not done, whatever the files say, and the judge
	// reports a failed claim.
	Rejected  string
	Learnings []string
	Log       *Transcript
	// Files are the paths the iteration changed, when the judge listed
	// them (nil otherwise: the engine asks git).
	Files []string
}

// Verdict is the judgement of an iteration (internal/judge).
type Verdict = judge.Verdict

// SyncReason says why the engine asks a source to bring state up to date.
type SyncReason int

const (
	// SyncNewRun: the state was just created. A source may mark items done
	// before the run (a story a person set to passes:true).
	SyncNewRun SyncReason = iota
	// SyncResume: the state was read back from disk.
	SyncResume
	// syncIteration: an iteration ended; its files may have changed items
	// (subtasks split off, tasks appended or archived by hand).
	syncIteration
	// SyncPoll: nothing is ready and the run watches for new work: re-read
	// what others may have appended.
	SyncPoll
)

// Source is a work source. The engine owns the loop (limits, prompts,
// agents, retries, state, events); a source owns what its work means:
// which item is next, which tree it runs in, how "done" is checked and
// recorded in git.
type Source interface {
	Info() SourceInfo
	// Items lists every item in display order (a Sparse source: every item
	// with a record).
	Items() []Item
	// Next returns the best ready item not in busy, or nil when none is
	// ready (the engine then decides complete vs blocked from state).
	Next(st *State, busy map[string]bool) (*Item, error)
	// Prepare readies the tree for an iteration on it. It is called again
	// for an iteration resumed after a crash and must then reattach.
	Prepare(ctx context.Context, it *Item, st *State) (Workspace, error)
	// Terms are what applies to an item's work, known before its agent
	// runs: its gates and checks, its flags, the branch it lands on, its
	// commit message. The judge pins the item's contract from them.
	Terms(it *Item, st *State) judge.Claim
	// Claim is the source's word on an iteration: its Terms, plus whether
	// its own signals claim the item done and what it put back of its own
	// files (an agent's edit of the PRD or the task file). A source never
	// judges: the one judge does.
	Claim(ctx context.Context, a *Attempt, st *State) judge.Claim
	// Landed is told that the item's work landed as commit: the source's
	// model, mirrors and trees follow.
	Landed(ctx context.Context, a *Attempt, v Verdict, commit string, st *State) error
	// Block gives up on an item after its attempts.
	Block(ctx context.Context, it *Item, st *State, reason string) error
	// Recover finishes an iteration that was in its commit phase when the
	// process died: it returns the commit if the item was already recorded.
	Recover(ctx context.Context, it *Item, st *State) (commit string, done bool, err error)
	// Sync brings item states up to date with the source's files (see
	// SyncReason); the engine then re-reads Items for the order and titles.
	Sync(st *State, why SyncReason) error
	// Close is told the final state when a run stops (mirror files,
	// leftover worktrees); an error is reported, the stop goes on.
	Close(st *State) error
}

// sparse is a Source whose items are too many to record one by one (a task
// tree goes to 100,000 tasks): its Items lists only the items with a record
// — worked on by this run, claimed, blocked or archived — in order, and
// Untracked counts the others, all pending and never started. Next may
// return an untracked item; from then on Items lists it. Every per-
// iteration cost of the engine (state saves, snapshots, syncs) then grows
// with the work done, not with the size of the tree.
type sparse interface {
	Untracked() int
}

// itemsVersioned is a Source whose Items can change only when ItemsVersion
// does: between two iterations with the same version the engine does not
// ask for the list again (a PRD of 1,000 stories would be copied into
// 1,000 items each iteration for nothing).
type itemsVersioned interface {
	ItemsVersion() uint64
}

// scheduled is a Source that also serves items of its own making, not
// among Items (a run folder's reviews and steering iterations): Lookup
// finds one by id, so an iteration on it that a crash interrupted is
// finished like any other. It returns nil for an id it does not know.
type scheduled interface {
	Lookup(id string) *Item
}

// conflicted is a Source whose items' work can fail to merge onto the
// branch (a story's worktree, a task's branch): Conflict readies the
// item's tree for a resolver — the branch merged into it, the conflicts
// in its files — and says what the resolver is told.
type conflicted interface {
	Conflict(ctx context.Context, it *Item, paths []string) (string, error)
}

// notPassedTold is a Source told of a verdict that did not pass (a task's
// completion claim goes back to active).
type notPassedTold interface {
	NotPassed(ctx context.Context, a *Attempt, v Verdict)
}

// unfinished is a Source that can hold a run back from "complete" though
// every item passed (a run folder's final review that was given up on):
// Unfinished says why, or "".
type unfinished interface {
	Unfinished(st *State) string
}
