package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/ralph-loop/ralph/internal/agent"
	"github.com/ralph-loop/ralph/internal/store"
)

// Run statuses; every stop has one and a reason.
const (
	StatusRunning       = "running"
	StatusComplete      = "complete"
	StatusMaxIterations = "max_iterations"
	StatusBudget        = "budget"
	StatusBlocked       = "blocked"
	StatusStopped       = "stopped"
	StatusInterrupted   = "interrupted"
	StatusError         = "error"
	// StatusAwaitingApproval: nothing can go on until a person approves
	// (or rejects) a plan (--plan-approval).
	StatusAwaitingApproval = "awaiting_approval"
	// StatusUnverified: nothing is left to run, but some items are only
	// marked done by hand (ItemMarked): the run is not complete.
	StatusUnverified = "unverified"
)

// Item statuses.
const (
	ItemPending = "pending"
	ItemRunning = "running"
	ItemPassed  = "passed"
	ItemBlocked = "blocked"
	// ItemMarked: the source's files mark the item done (passes: true, a
	// ticked box, a line in tasks-done.jsonl) but no commit of ralph's on
	// the branch the work lands on records it. It is never counted
	// passed, nor blocked: it is counted apart. A PRD (or plan) offers
	// it as work, so an agent verifies it like any story (MarksWorked); a
	// task tree's archive is append-only, so such a task is not worked
	// on, and a run left with only such items ends StatusUnverified.
	// Config.TrustMarks counts them passed.
	ItemMarked = "marked"
)

// MarkedLabel is how every surface names an ItemMarked item.
const MarkedLabel = "marked by hand, not verified"

// TrustedReason is the reason of an item marked by hand that the run
// counts as passed because a person said to trust marks.
const TrustedReason = "marked done by hand; counted as passed because marks are trusted (--trust-marks), not verified by ralph"

// Iteration phases, persisted so a resume knows what was under way.
const (
	PhaseAgent  = "agent"
	PhaseVerify = "verify"
	PhaseCommit = "commit"
)

// State is .ralph/state.json: the harness's truth about a run. It is
// rewritten atomically after every step.
type State struct {
	Version       int                   `json:"version"`
	RunID         string                `json:"run_id"`
	Source        string                `json:"source"` // prd | tasks | pipeline | loop
	SourcePath    string                `json:"source_path"`
	Branch        string                `json:"branch,omitempty"`
	BaseBranch    string                `json:"base_branch,omitempty"`
	Agent         string                `json:"agent"`
	Status        string                `json:"status"`
	StopReason    string                `json:"stop_reason,omitempty"`
	StartedAt     time.Time             `json:"started_at"`
	UpdatedAt     time.Time             `json:"updated_at"`
	Iteration     int                   `json:"iteration"`         // iterations started (numbers transcripts)
	Refunds       int                   `json:"refunds,omitempty"` // started but not counted: rate-limited or crash-interrupted
	MaxIterations int                   `json:"max_iterations"`
	MaxAttempts   int                   `json:"max_attempts"`
	Order         []string              `json:"order"`
	Items         map[string]*ItemState `json:"items"`
	// Untracked counts the source's items that have no record yet: pending
	// and never started. A task tree of 100,000 tasks keeps only the tasks
	// a run touched in Order and Items, so that saving the state costs
	// what the run did, not what the tree holds (see Sparse).
	Untracked int `json:"untracked,omitempty"`
	// RoleLast is the iteration at which each role last served.
	RoleLast      map[string]int `json:"role_last,omitempty"`
	Current       []*Current     `json:"current,omitempty"`
	Usage         agent.Usage    `json:"usage"`
	RateLimitedAt *time.Time     `json:"rate_limited_until,omitempty"`
	// AgentCalls are the agent starts of the last hour, for
	// RateLimitConfig.MaxCallsPerHour (kept across a resume).
	AgentCalls []time.Time `json:"agent_calls,omitempty"`
	Breaker    Breaker     `json:"breaker"`
	// TranscriptMax is the cap on each transcript's size, in bytes.
	TranscriptMax int64 `json:"transcript_max_bytes,omitempty"`
	// Preexisting lists paths that were dirty when the run started with
	// --allow-dirty: they are the user's, and ralph never commits them.
	Preexisting []string `json:"preexisting,omitempty"`
	// PolicyPinnedAt is when the policy in force was pinned (the run's
	// start, or a later --reload-policy): files git ignores that changed
	// since are the run's, not the user's environment (EnvSince).
	PolicyPinnedAt time.Time `json:"policy_pinned_at,omitempty"`
	// BaseRed is what fails since the base and still fails where the
	// work last landed (each gate, or gate: test): work for the run,
	// never blamed on an item, never called passed. NoInventory are the
	// gates that run tests whose output ralph cannot read.
	BaseRed     []string `json:"base_red,omitempty"`
	NoInventory []string `json:"no_test_inventory,omitempty"`

	// Parallel is the agents the run may have at once, and MaxCost and
	// MaxTokens its budget (0: none), as the run was last started with:
	// the dashboard draws its slots and its budget line from them.
	Parallel  int     `json:"parallel,omitempty"`
	MaxCost   float64 `json:"max_cost,omitempty"`
	MaxTokens int64   `json:"max_tokens,omitempty"`
}

// EnvSince is when the run took the environment as it is: the later of
// its start and its policy's pinning. Files git ignores that changed
// after it are set aside while gates run.
func (st *State) EnvSince() time.Time {
	if st.PolicyPinnedAt.After(st.StartedAt) {
		return st.PolicyPinnedAt
	}
	return st.StartedAt
}

// ItemState is the harness's record of one story/task/stage.
type ItemState struct {
	ID          string     `json:"id"`
	Title       string     `json:"title"`
	Status      string     `json:"status"`
	Attempts    int        `json:"attempts"` // iterations spent without passing
	Runs        int        `json:"runs"`     // agent starts, rate-limited ones included
	Commit      string     `json:"commit,omitempty"`
	PassedAt    *time.Time `json:"passed_at,omitempty"`
	LastResult  string     `json:"last_result,omitempty"`  // one line
	LastFailure string     `json:"last_failure,omitempty"` // retry context for the next prompt
	Reason      string     `json:"reason,omitempty"`       // why blocked / how passed
	BaseHead    string     `json:"base_head,omitempty"`    // HEAD before the item's first iteration
	Iterations  []int      `json:"iterations,omitempty"`
	// What the harness measured at the end of the item's last iteration:
	// the facts roles' trigger conditions read (internal/roles.Env).
	Role         string   `json:"role,omitempty"`                 // the role of its last iteration
	LastFailed   bool     `json:"last_failed,omitempty"`          // it failed (a claim that failed, or no progress)
	Failures     int      `json:"consecutive_failures,omitempty"` // failed iterations in a row
	FailedGates  []string `json:"failed_gates,omitempty"`
	FilesChanged int      `json:"files_changed,omitempty"`
	Commits      int      `json:"branch_commits,omitempty"` // commits since BaseHead
	InProgress   int      `json:"in_progress,omitempty"`    // iterations that made progress without claiming done
	TreeMark     string   `json:"tree_mark,omitempty"`      // fingerprint of the changed files the last iteration left
	// Review is the role that must approve before the item passes: its
	// claim passed the gates and a completion trigger (ReviewWhy) fired.
	Review    string `json:"review,omitempty"`
	ReviewWhy string `json:"review_why,omitempty"`
	// Revise: a review asked for changes; the next iteration is a worker
	// iteration that addresses them (no trigger is asked).
	Revise bool `json:"revise,omitempty"`
	// Fix is the role of a test-fix re-run the item waits for (--test-fix:
	// its claim failed the test gate, the attempt is not spent yet) and
	// Fixes the re-runs of the current attempt so far.
	Fix   string `json:"fix,omitempty"`
	Fixes int    `json:"fixes,omitempty"`
	// Plan is where the item is in plan approval (--plan-approval): ""
	// (no plan yet, or a rejected one: the next iteration plans),
	// PlanWaiting or PlanApproved; PlanRev counts the plans written, so
	// that a decision is applied to the plan it was made on.
	Plan    string `json:"plan,omitempty"`
	PlanRev int    `json:"plan_rev,omitempty"`
	// Usage is what the agents spent on the item (the run's total has it
	// too).
	Usage *agent.Usage `json:"usage,omitempty"`
}

// Plan approval states of an item.
const (
	PlanWaiting  = "waiting"
	PlanApproved = "approved"
)

// Current is an iteration under way (several with --parallel).
type Current struct {
	Item      string    `json:"item"`
	Iteration int       `json:"iteration"`
	Attempt   int       `json:"attempt"`
	Phase     string    `json:"phase"`
	BaseHead  string    `json:"base_head"` // HEAD before the agent ran
	StartedAt time.Time `json:"started_at"`
	Worktree  string    `json:"worktree,omitempty"`
	AgentPID  int       `json:"agent_pid,omitempty"`      // process group of the running agent
	QueuePos  int       `json:"queue_position,omitempty"` // place in the merge queue (1 = merging)
	LastGate  string    `json:"last_gate,omitempty"`
	// Final is the agent's final message (bounded), kept from the end of
	// the agent's run until the verdict so that an iteration interrupted
	// while verifying is verified again without running the agent.
	Final string `json:"final,omitempty"`
	// Role is the iteration's role ("" for a plain worker iteration) and
	// RoleWhy the trigger that chose it.
	Role    string `json:"role,omitempty"`
	RoleWhy string `json:"role_why,omitempty"`
	// Planning: the iteration writes the item's plan (--plan-approval);
	// StartHead is HEAD when it began, to tell that it committed nothing.
	Planning  bool   `json:"planning,omitempty"`
	StartHead string `json:"start_head,omitempty"`
}

// Breaker counts repeated failures; it opens when the same failure
// signature repeats N times in a row or nothing passes for N iterations.
type Breaker struct {
	LastSignature string `json:"last_signature,omitempty"`
	SameCount     int    `json:"same_count"`
	NoProgress    int    `json:"no_progress"`
	// OpenedAt and Fingerprint are when the breaker opened and the sum of
	// what a person would change to fix the cause, then (see halfOpen).
	OpenedAt    time.Time `json:"opened_at,omitzero"`
	Fingerprint string    `json:"fingerprint,omitempty"`
}

// Paths are ralph's files inside a repository.
type Paths struct {
	Root        string // repo top level
	Dir         string // .ralph
	State       string
	Events      string
	Progress    string
	Transcripts string
	Lock        string
	Stop        string
	// RootStop is the stop file of the minimal external loop: `touch
	// .stop` at the repository root stops the loop between iterations
	// like .ralph/stop (kept out of git: an agent's .stop is never
	// committed).
	RootStop string
	// Pause, while it exists, holds new iterations back (the ones under
	// way finish): `ralph pause`, the dashboard's p.
	Pause      string
	PromptFile string
	// Summary, when set (a run folder's SUMMARY.md), gets a short debrief
	// of each item that passes.
	Summary string
}

// RootStopFile is the stop file at the repository root.
const RootStopFile = ".stop"

// stopRequested names the stop file that asks the run to stop
// (.ralph/stop, then .stop at the root), or "" for none.
func (p Paths) stopRequested() string {
	for _, f := range []string{p.Stop, p.RootStop} {
		if f == "" {
			continue
		}
		if _, err := os.Stat(f); err == nil {
			return f
		}
	}
	return ""
}

// PathsFor returns the layout under root/.ralph.
func PathsFor(root string) Paths {
	d := filepath.Join(root, ".ralph")
	return Paths{
		Root: root, Dir: d,
		State:       filepath.Join(d, "state.json"),
		Events:      filepath.Join(d, "events.jsonl"),
		Progress:    filepath.Join(d, "progress.md"),
		Transcripts: filepath.Join(d, "transcripts"),
		Lock:        filepath.Join(d, "run.lock"),
		Stop:        filepath.Join(d, "stop"),
		RootStop:    filepath.Join(root, RootStopFile),
		Pause:       filepath.Join(d, "pause"),
		PromptFile:  filepath.Join(d, "prompt.md"),
	}
}

// LoadState reads state.json; (nil, nil) when there is none. A file that
// is not a run's state is a *CorruptStateError (see RebuildState).
func LoadState(path string) (*State, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading run state: %w", err)
	}
	st := &State{}
	if err := json.Unmarshal(b, st); err != nil {
		return nil, &corruptStateError{Path: path, Err: err}
	}
	if st.RunID == "" || st.Source == "" {
		return nil, &corruptStateError{Path: path, Err: errors.New("it records no run (no run_id or source)")}
	}
	if st.Items == nil {
		st.Items = map[string]*ItemState{}
	}
	return st, nil
}

// LoadOrRebuildState is LoadState, with a corrupt state.json rebuilt from
// the event log (RebuildState) without writing anything; note says so.
func LoadOrRebuildState(p Paths) (st *State, note string, err error) {
	return loadOrRebuild(p)
}

// removeOldJournal removes state.journal.jsonl, the change log that older
// versions of ralph kept beside state.json while a run went on, when a run
// opens. It is never read: what it held beyond the document is at most
// work redone, as after any crash (a resume believes the state only where
// the repository agrees). A file that cannot go is harmless.
func removeOldJournal(statePath string) {
	_ = os.Remove(filepath.Join(filepath.Dir(statePath), "state.journal.jsonl"))
}

// removeState removes a state file, if there is one.
func removeState(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// stateBox holds a run's state for concurrent workers: every change is
// made under one lock and written whole before the lock is released, so
// the file on disk is always a state the run was in.
type stateBox struct {
	mu   sync.Mutex
	st   *State
	path string
	now  func() time.Time
}

func newStateBox(st *State, path string, now func() time.Time) *stateBox {
	return &stateBox{st: st, path: path, now: now}
}

// update applies fn and writes the whole state atomically (temp file and
// rename) without an fsync: a kill -9 of ralph never tears what a reader
// sees. The state is a record of the run, not its proof: what passed is
// proven by commits on the branch, and a resume believes the state only
// where the repository agrees. So a power cut that loses the last writes
// costs at most work redone, never a wrong "passed".
func (b *stateBox) update(fn func(st *State)) error { return b.write(fn, false) }

// updateDurable is update with an fsync, for a fact that must survive a
// power cut: the commit phase is under way, the run stopped.
func (b *stateBox) updateDurable(fn func(st *State)) error { return b.write(fn, true) }

func (b *stateBox) write(fn func(st *State), sync bool) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	fn(b.st)
	b.st.UpdatedAt = b.now().UTC()
	// Compact: a run of 1,000 stories writes the state several times an
	// iteration, and indenting doubles the cost of each write.
	data, err := json.Marshal(b.st)
	if err != nil {
		return err
	}
	data = append(data, '\n')
	if sync {
		return store.WriteFile(b.path, data, 0o600)
	}
	return store.WriteFileNoSync(b.path, data, 0o600)
}

// close writes the state one last time, fsynced: the run's last word.
func (b *stateBox) close() error { return b.updateDurable(func(*State) {}) }

// mutate changes the state in memory only; the next update writes it.
func (b *stateBox) mutate(fn func(st *State)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	fn(b.st)
}

func (b *stateBox) read(fn func(st *State)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	fn(b.st)
}

// snapshot is a copy of the state for a source to read (or change) while
// workers keep updating the original.
func (b *stateBox) snapshot() *State {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.st.Clone()
}

// Item returns the record of item id, creating a pending one when there is
// none yet.
func (st *State) Item(id string) *ItemState {
	is, ok := st.Items[id]
	if !ok {
		is = &ItemState{ID: id, Status: ItemPending}
		st.Items[id] = is
	}
	return is
}

func (st *State) current(id string) *Current {
	for _, c := range st.Current {
		if c.Item == id {
			return c
		}
	}
	return nil
}

func (st *State) dropCurrent(id string) {
	out := st.Current[:0]
	for _, c := range st.Current {
		if c.Item != id {
			out = append(out, c)
		}
	}
	st.Current = out
}

// Passed returns the set of passed item ids.
func (st *State) Passed() map[string]bool {
	m := map[string]bool{}
	for id, is := range st.Items {
		if is.Status == ItemPassed {
			m[id] = true
		}
	}
	return m
}

// Done reports whether the item passed or is marked done by hand
// (ItemMarked): the files say it is done.
func (is *ItemState) Done() bool {
	return is != nil && (is.Status == ItemPassed || is.Status == ItemMarked)
}

// Marked are the ids of the items marked done by hand and not verified
// (ItemMarked), in display order.
func (st *State) Marked() []string {
	var out []string
	for _, id := range st.Order {
		if is := st.Items[id]; is != nil && is.Status == ItemMarked {
			out = append(out, id)
		}
	}
	return out
}

// addUsage counts what an agent spent on item id, in the run's total and
// the item's.
func (st *State) addUsage(id string, u agent.Usage) {
	st.Usage.Add(u)
	if u == (agent.Usage{}) {
		return
	}
	is := st.Item(id)
	if is.Usage == nil {
		is.Usage = &agent.Usage{}
	}
	is.Usage.Add(u)
}

// Counts returns passed, blocked and total items. Items marked by hand
// (Marked) are neither passed nor blocked.
func (st *State) Counts() (passed, blocked, total int) {
	for _, id := range st.Order {
		switch st.Items[id].Status {
		case ItemPassed:
			passed++
		case ItemBlocked:
			blocked++
		}
	}
	return passed, blocked, st.Total()
}

// MarkedCount is what a pass count adds for n items marked by hand:
// ", 2 marked by hand (not verified)", or "" for none.
func MarkedCount(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(", %d marked by hand (not verified)", n)
}

// Total is the number of items, recorded or not.
func (st *State) Total() int { return len(st.Order) + st.Untracked }

// Counted is the number of iterations that count against the limit.
func (st *State) Counted() int { return st.Iteration - st.Refunds }

// Clone is a deep copy of st: changing either leaves the other as it was.
func (st *State) Clone() *State {
	c := *st
	c.Order = slices.Clone(st.Order)
	c.Items = make(map[string]*ItemState, len(st.Items))
	for id, is := range st.Items {
		ic := *is
		ic.Iterations = slices.Clone(is.Iterations)
		ic.FailedGates = slices.Clone(is.FailedGates)
		ic.PassedAt = clonePtr(is.PassedAt)
		ic.Usage = clonePtr(is.Usage)
		c.Items[id] = &ic
	}
	c.RoleLast = maps.Clone(st.RoleLast)
	c.Current = nil
	for _, cur := range st.Current {
		c.Current = append(c.Current, clonePtr(cur))
	}
	c.RateLimitedAt = clonePtr(st.RateLimitedAt)
	c.AgentCalls = slices.Clone(st.AgentCalls)
	c.Preexisting = slices.Clone(st.Preexisting)
	c.BaseRed = slices.Clone(st.BaseRed)
	c.NoInventory = slices.Clone(st.NoInventory)
	return &c
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	c := *p
	return &c
}

// ActiveRun reports whether a ralph process holds the run lock in p, and
// who, without taking the lock (read-only commands never do).
func ActiveRun(p Paths) (bool, store.Holder) {
	return store.Held(p.Lock)
}
