package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
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
)

// Item statuses.
const (
	ItemPending = "pending"
	ItemRunning = "running"
	ItemPassed  = "passed"
	ItemBlocked = "blocked"
)

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
	// a run touched in Order and Items, so that saving the state costs the
	// same at any size (see Sparse).
	Untracked int `json:"untracked,omitempty"`
	// RoleLast is the iteration at which each role last served.
	RoleLast      map[string]int `json:"role_last,omitempty"`
	Current       []*Current     `json:"current,omitempty"`
	Usage         agent.Usage    `json:"usage"`
	RateLimitedAt *time.Time     `json:"rate_limited_until,omitempty"`
	Breaker       Breaker        `json:"breaker"`
	// TranscriptMax is the cap on each transcript's size, in bytes.
	TranscriptMax int64 `json:"transcript_max_bytes,omitempty"`
	// Preexisting lists paths that were dirty when the run started with
	// --allow-dirty: they are the user's, and ralph never commits them.
	Preexisting []string `json:"preexisting,omitempty"`

	// dirty and orderChanged mark what changed since the state was last
	// written, for the journal (journal.go).
	dirty        map[string]bool
	orderChanged bool
	// fresh marks the records changed since the last snapshot, whose
	// copies the next one makes (stateBox.snapshot); a snapshot is frozen.
	fresh  map[string]bool
	frozen bool
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
	// Pause, while it exists, holds new iterations back (the ones under
	// way finish): `ralph pause`, the dashboard's p.
	Pause      string
	PromptFile string
	// Summary, when set (a run folder's SUMMARY.md), gets a short debrief
	// of each item that passes.
	Summary string
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
		Pause:       filepath.Join(d, "pause"),
		PromptFile:  filepath.Join(d, "prompt.md"),
	}
}

// LoadState reads state.json and applies its journal (see journal.go);
// (nil, nil) when there is none. A file that is not a run's state is a
// *CorruptStateError (see RebuildState).
func LoadState(path string) (*State, error) {
	for try := 0; ; try++ {
		st, again, err := loadState(path)
		if !again || try == 9 {
			return st, err
		}
	}
}

// loadState reads the document and the journal once; again reports that
// the document was replaced while it read (a compaction): the journal it
// read may belong to the new document.
func loadState(path string) (st *State, again bool, err error) {
	before, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("reading run state: %w", err)
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, true, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("reading run state: %w", err)
	}
	journal, err := readJournal(path)
	if err != nil {
		return nil, false, fmt.Errorf("reading run state: %w", err)
	}
	if after, err := os.Stat(path); err != nil || !os.SameFile(before, after) {
		return nil, true, nil
	}
	st = &State{}
	if err := json.Unmarshal(b, st); err != nil {
		return nil, false, &CorruptStateError{Path: path, Err: err}
	}
	if st.Items == nil {
		st.Items = map[string]*ItemState{}
	}
	if err := applyJournal(st, JournalPath(path), journal); err != nil {
		return nil, false, err
	}
	if st.RunID == "" || st.Source == "" {
		return nil, false, &CorruptStateError{Path: path, Err: errors.New("it records no run (no run_id or source)")}
	}
	return st, false, nil
}

// LoadOrRebuildState is LoadState, with a corrupt state.json rebuilt from
// the event log (RebuildState) without writing anything; note says so.
func LoadOrRebuildState(p Paths) (st *State, note string, err error) {
	return loadOrRebuild(p)
}

// stateBox serialises state changes from concurrent workers and writes
// every change: one line appended to the journal (journal.go), the whole
// document only when the journal is folded into it. Writes are group
// commits: a change is marshalled under mu, and one write (under wmu)
// covers every change made before it, so workers do not queue behind each
// other's writes.
type stateBox struct {
	mu      sync.Mutex
	st      *State
	path    string
	now     func() time.Time
	version uint64 // bumped by every change (under mu)
	// running are the items of the iterations under way at the last
	// write: their records go into the next line too (under mu).
	running map[string]bool
	// shadow and shadowOrder are the records as last written, in check
	// mode only (journalChecked).
	shadow      map[string][]byte
	shadowOrder []string
	// copies are the records as the last snapshot copied them, which
	// snapshots share: none of them is ever changed (under mu).
	copies map[string]*ItemState

	wmu     sync.Mutex
	written uint64 // newest version on disk (under wmu)
	synced  uint64 // newest version on disk and fsynced (under wmu)
	journal *os.File
	jsize   int64 // bytes in the journal
	docSize int64 // bytes of the document at the last compaction
}

func newStateBox(st *State, path string, now func() time.Time) *stateBox {
	return &stateBox{st: st, path: path, now: now, running: map[string]bool{}}
}

// update applies fn and records the change (a line appended to the
// journal, or the whole document written atomically) without an fsync. A
// kill -9 of ralph never tears what a reader sees: a torn journal line is
// ignored. The state is a record of the run, not its proof: what passed is
// proven by commits on the branch, and a resume believes the state only
// where the repository agrees. So a power cut that loses the last writes
// costs at most work redone, never a wrong "passed" — and each iteration
// saves the fsyncs a disk makes it wait for.
func (b *stateBox) update(fn func(st *State)) error {
	return b.change(fn, false)
}

// updateLight is update (kept for the facts that were always cheap to
// lose, such as the agent's pid).
func (b *stateBox) updateLight(fn func(st *State)) error {
	return b.change(fn, false)
}

// updateDurable is update with an fsync, for a fact that must survive a
// power cut (the commit phase is under way).
func (b *stateBox) updateDurable(fn func(st *State)) error {
	return b.change(fn, true)
}

func (b *stateBox) change(fn func(st *State), sync bool) error {
	b.mu.Lock()
	fn(b.st)
	b.st.UpdatedAt = b.now().UTC()
	b.version++
	v := b.version
	b.mu.Unlock()

	b.wmu.Lock()
	defer b.wmu.Unlock()
	if b.synced >= v || !sync && b.written >= v {
		return nil // a write made after this change covered it
	}
	if b.journal == nil {
		return b.compactLocked(sync)
	}
	var line []byte
	var err error
	cur := b.locked(func() { line, err = b.delta() })
	if err != nil {
		return err
	}
	if _, err := b.journal.Write(line); err != nil {
		return err
	}
	b.jsize += int64(len(line))
	if sync {
		if err := b.journal.Sync(); err != nil {
			return err
		}
	}
	b.written = cur
	if sync {
		b.synced = cur
	}
	if b.jsize > max(journalCompactMin, 4*b.docSize) {
		return b.compactLocked(false)
	}
	return nil
}

// compact folds the journal into the document: the whole state written
// atomically, fsynced when sync (the run's last word), and an empty
// journal. Every run opens and stops with one.
func (b *stateBox) compact(sync bool) error {
	b.wmu.Lock()
	defer b.wmu.Unlock()
	return b.compactLocked(sync)
}

func (b *stateBox) compactLocked(sync bool) error {
	var line, data []byte
	var err error
	cur := b.locked(func() {
		if b.journal != nil {
			line, err = b.delta() // the journal first holds what the document will
		}
		if err == nil {
			data, err = json.MarshalIndent(b.st, "", "  ")
		}
		clear(b.st.dirty)
		b.st.orderChanged = false
		b.noteRunning()
		b.resetShadow()
	})
	if err != nil {
		return err
	}
	if line != nil {
		if _, err := b.journal.Write(line); err != nil {
			return err
		}
	}
	data = append(data, '\n')
	if sync {
		err = store.WriteFile(b.path, data, 0o600)
	} else {
		err = store.WriteFileNoSync(b.path, data, 0o600)
	}
	if err != nil {
		return err
	}
	// The document holds everything: a new, empty journal replaces the old
	// one (a rename, so that a reader holding the old one reads all of it).
	jpath := JournalPath(b.path)
	if betweenCompactionRenames != nil {
		betweenCompactionRenames(jpath)
	}
	if err := store.WriteFileNoSync(jpath, nil, 0o600); err != nil {
		return err
	}
	if b.journal != nil {
		b.journal.Close()
	}
	if b.journal, err = os.OpenFile(jpath, os.O_WRONLY|os.O_APPEND, 0o600); err != nil {
		b.journal = nil // the next change writes the document
		return err
	}
	b.jsize, b.docSize = 0, int64(len(data))
	b.written = cur
	if sync {
		b.synced = cur
	}
	return nil
}

// betweenCompactionRenames is a test hook: a crash between the document's
// rename and the journal's.
var betweenCompactionRenames func(journal string)

// locked runs fn with mu held (released even if fn panics) and returns
// the version fn saw.
func (b *stateBox) locked(fn func()) uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	fn()
	return b.version
}

// close folds the journal into the document (fsynced) and closes it.
func (b *stateBox) close() error {
	b.wmu.Lock()
	defer b.wmu.Unlock()
	err := b.compactLocked(true)
	if b.journal != nil {
		b.journal.Close()
		b.journal = nil
	}
	return err
}

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

// Item returns the record of item id, creating a pending one when there is
// none yet, and marks it changed (see Touch): a caller that only reads a
// record uses st.Items.
func (st *State) Item(id string) *ItemState {
	st.Touch(id)
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

// Counts returns passed, blocked and total items.
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

// Total is the number of items, recorded or not.
func (st *State) Total() int { return len(st.Order) + st.Untracked }

// Counted is the number of iterations that count against the limit.
func (st *State) Counted() int { return st.Iteration - st.Refunds }

// snapshot copies the state deeply enough for a source to read while
// workers keep updating the original. A snapshot is read-only: the copies
// of the records are shared by the snapshots made while the record did not
// change, so a PRD of 1,000 stories, snapshotted several times per
// iteration, costs a copy of the few records that changed, not of all of
// them. A source that changes what it is given copies it first (Clone).
func (b *stateBox) snapshot() *State {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.copies == nil || len(b.copies) > len(b.st.Items) {
		b.copies = copyItems(b.st.Items)
	} else {
		for id := range b.st.fresh {
			if v, ok := b.st.Items[id]; ok {
				vv := *v
				b.copies[id] = &vv
			}
		}
	}
	clear(b.st.fresh)
	if journalChecked {
		b.checkCopies()
	}
	c := b.st.copyWith(maps.Clone(b.copies))
	c.frozen = true
	return c
}

// copyItems copies records into one array (one object to make and to
// collect, not one per record).
func copyItems(items map[string]*ItemState) map[string]*ItemState {
	out := make(map[string]*ItemState, len(items))
	copies := make([]ItemState, 0, len(items))
	for k, v := range items {
		copies = append(copies, *v)
		out[k] = &copies[len(copies)-1]
	}
	return out
}

// copyWith is a copy of st with the records items, deep enough that
// changing it leaves st as it was.
func (st *State) copyWith(items map[string]*ItemState) *State {
	c := *st
	c.dirty, c.fresh, c.orderChanged, c.frozen = nil, nil, false, false
	c.Items = items
	c.Order = append([]string(nil), st.Order...)
	c.Current = nil
	for _, cur := range st.Current {
		cc := *cur
		c.Current = append(c.Current, &cc)
	}
	c.Preexisting = append([]string(nil), st.Preexisting...)
	c.RoleLast = maps.Clone(st.RoleLast)
	return &c
}

// checkCopies panics, in ralph's own tests (journalChecked), when a record
// changed without a mark since the last snapshot, which would then show it
// as it was. Called with mu held.
func (b *stateBox) checkCopies() {
	for id, is := range b.st.Items {
		want, _ := json.Marshal(is)
		got, _ := json.Marshal(b.copies[id])
		if string(got) != string(want) {
			panic(fmt.Sprintf("state snapshot: record %s changed without a mark (use State.Item or State.Touch):\n%s\n%s", id, got, want))
		}
	}
}

// Clone copies a state deeply enough to change it: a snapshot is
// read-only.
func (st *State) Clone() *State { return st.copyWith(copyItems(st.Items)) }

// ActiveRun reports whether a ralph process holds the run lock in p, and
// who, without taking the lock (read-only commands never do).
func ActiveRun(p Paths) (bool, store.Holder) {
	return store.Held(p.Lock)
}
