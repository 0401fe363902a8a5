package source

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/gate"
	"github.com/ralph-loop/ralph/internal/git"
	"github.com/ralph-loop/ralph/internal/proc"
	"github.com/ralph-loop/ralph/internal/sandbox"
	"github.com/ralph-loop/ralph/internal/store"
)

// baselineFile is where the baseline is kept, under .ralph/: outside
// state.json, so it can be taken again on its own when missing or when
// the base moved.
const baselineFile = "baseline.json"

// Baseline is what the run-wide gates (quality_checks, --gate) say about
// an untouched base commit, taken before the first agent run: which
// gates fail there already (a failure that is no story's fault) and the
// tests that pass there (a story that makes one of them go missing,
// skip or fail does not pass). A story's own checks are not part of it:
// they test the story's work, which the base does not have yet.
type Baseline struct {
	Commit  string        `json:"commit"`
	Taken   time.Time     `json:"taken"`
	Gates   []gate.Gate   `json:"gates"`
	Results []gate.Result `json:"results"`

	path   string
	repo   *git.Repo
	runner gate.Runner
	// Exclusive, when set, runs the adds and removes of the baseline's
	// worktree alone (ParallelPRD.addingWorktree): the base moves during a
	// parallel run, and a git command that reads every worktree's HEAD
	// beside a half-made one fails (a coordinator's fetch of a worker's
	// commit did: "bad object worktrees/baseline-tree/HEAD").
	Exclusive func(func() error) error `json:"-"`
	mu        sync.Mutex
	// known are the inventories of other commits this run met: an item
	// cut from a base that moved is judged against its own base.
	known map[string][]gate.Result
}

// Failing are the gates that failed at the base.
func (b *Baseline) Failing() []gate.Result {
	var out []gate.Result
	for _, r := range b.Results {
		if !r.Passed {
			out = append(out, r)
		}
	}
	return out
}

// TakeBaseline runs gates on commit rev of repo as it is committed, or
// reads the baseline that .ralph/baseline.json (under dir) already holds
// for that commit and those gates (a resumed run). The gates run in a
// detached worktree of the commit, removed after: the main tree, which
// may hold the user's uncommitted work, is not touched. Every gate runs, also after one failed: the
// report names them all. A repository without commits has no baseline
// (nil).
func TakeBaseline(ctx context.Context, repo *git.Repo, dir, rev string, runner gate.Runner, gates []gate.Gate, log io.Writer) (*Baseline, error) {
	commit, err := repo.RevParse(ctx, rev)
	if err != nil || commit == "" {
		return nil, nil
	}
	b := &Baseline{path: filepath.Join(dir, baselineFile), repo: repo, runner: runner}
	var saved Baseline
	if err := store.ReadJSON(b.path, &saved); err == nil && saved.Commit == commit && slices.Equal(saved.Gates, gates) {
		b.Commit, b.Taken, b.Gates, b.Results = saved.Commit, saved.Taken, saved.Gates, saved.Results
		return b, nil
	}
	b.Gates = gates
	results, err := b.run(ctx, commit, log)
	if err != nil {
		return nil, err
	}
	b.Commit, b.Taken, b.Results = commit, time.Now().UTC(), results
	return b, b.save()
}

// baselineTag marks the processes a baseline starts (the checkout and the
// gates), so the next run can stop what a killed one left running there.
const baselineTag = "RALPH_BASELINE_TREE"

// run runs the gates on commit's tree and returns every gate's result.
func (b *Baseline) run(ctx context.Context, commit string, log io.Writer) ([]gate.Result, error) {
	tree := filepath.Join(filepath.Dir(b.path), "baseline-tree")
	// A tree a killed run left behind goes first, with what that run left
	// running in it: its processes carry the tree's tag (a killed `git
	// worktree add` hangs on, or leaves git's "initializing" lock, which
	// no prune clears and every later add of the path trips on).
	tag := baselineTag + "=" + tree
	proc.KillTagged(tag, true)
	ctx = proc.WithTag(ctx, tag)
	if _, err := b.repo.RepairHalfAdded(ctx, tree); err != nil {
		return nil, fmt.Errorf("repairing the baseline's tree a killed run left: %w", err)
	}
	exclusive := b.Exclusive
	if exclusive == nil {
		exclusive = func(fn func() error) error { return fn() }
	}
	err := exclusive(func() error {
		_ = b.repo.WorktreeRemove(ctx, tree)
		_ = os.RemoveAll(tree)
		_ = b.repo.WorktreePrune(ctx)
		if err := os.MkdirAll(filepath.Dir(tree), 0o755); err != nil {
			return err
		}
		if err := b.repo.WorktreeAddDetached(ctx, tree, commit); err != nil {
			return fmt.Errorf("checking out the base %s for its baseline: %w", short(commit), err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	defer func() {
		_ = exclusive(func() error {
			_ = b.repo.WorktreeRemove(context.WithoutCancel(ctx), tree)
			return os.RemoveAll(tree)
		})
	}()
	if log == nil {
		log = io.Discard
	}
	var results []gate.Result
	for _, g := range b.Gates {
		r, _ := b.runner.Run(ctx, tree, []gate.Gate{g}, log)
		results = append(results, r...)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	return results, nil
}

func (b *Baseline) save() error {
	if err := os.MkdirAll(filepath.Dir(b.path), 0o755); err != nil {
		return err
	}
	return store.WriteJSON(b.path, b)
}

// at is the inventory of commit: the baseline's own, one this run
// recorded (Advance), or — the base moved since the baseline was taken —
// the gates run on it now. "" is the baseline's commit.
func (b *Baseline) at(ctx context.Context, commit string, log io.Writer) []gate.Result {
	b.mu.Lock()
	defer b.mu.Unlock()
	if commit == "" || commit == b.Commit {
		return b.Results
	}
	if r, ok := b.known[commit]; ok {
		return r
	}
	fmt.Fprintf(logOr(log), "\n=== the base moved to %s: the run-wide gates run there first (the baseline)\n", short(commit))
	results, err := b.run(ctx, commit, log)
	if err != nil {
		return b.Results // the older baseline is the best known
	}
	b.remember(commit, results)
	return results
}

// Advance records the results of the run-wide gates in a verdict that
// passed on exactly the tree of commit (the item's own commit): the next
// item cut from commit is judged against them with no second run.
func (b *Baseline) Advance(commit string, v engine.Verdict) {
	if b == nil || commit == "" {
		return
	}
	var results []gate.Result
	for _, g := range b.Gates {
		for _, r := range v.Gates {
			if r.Name == g.Name && r.Command == g.Command {
				results = append(results, r)
			}
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.remember(commit, results)
	b.Commit, b.Results, b.Taken = commit, results, time.Now().UTC()
	_ = b.save() // a baseline not saved is taken again on resume
}

// remember keeps commit's inventory (a few: the newest bases are the
// ones items are cut from). Called with mu held.
func (b *Baseline) remember(commit string, results []gate.Result) {
	if b.known == nil || len(b.known) >= 64 {
		b.known = map[string][]gate.Result{}
	}
	b.known[commit] = results
}

func logOr(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// judging is what judge needs to hold a verdict against the item's base:
// handed through the context by a source's Verify, since judge is shared
// by every source.
type judging struct {
	baseline         *Baseline // nil: none
	base             string    // the item's base commit ("" HEAD, or the baseline's)
	allowTestChanges bool
	// since is when the run started: ignored files changed after it are
	// set aside while the gates run (aside.go), but outputs, the gates'
	// own.
	since   time.Time
	outputs *gateOutputs
	keep    []string // ralph's own files in the tree, never set aside
}

type judgingKey struct{}

// withJudging is ctx carrying what judge holds an item's verdict against.
func withJudging(ctx context.Context, j judging) context.Context {
	return context.WithValue(ctx, judgingKey{}, j)
}

func judgingOf(ctx context.Context) judging {
	j, _ := ctx.Value(judgingKey{}).(judging)
	return j
}

// againstBaseline finishes judge's verdict on the gates:
//   - a gate that failed at the item's base too is not the item's fault:
//     it need not pass, the gates after it run, and the verdict says so;
//   - a passing item that made a test that passed at its base go missing,
//     skip or fail does not pass (unless the item allows test changes);
//   - the summary carries the test counts ("test: 42 passed, …"), which
//     the commit's "Verified by ralph" line and status show.
func againstBaseline(ctx context.Context, a *engine.Attempt, v engine.Verdict, runner gate.Runner, gates []gate.Gate) engine.Verdict {
	j := judgingOf(ctx)
	var base []gate.Result
	if j.baseline != nil {
		base = j.baseline.at(ctx, j.base, a.Log)
		v = tolerateBaseFailures(ctx, a, v, runner, gates, base)
	}
	if counts := gate.Counts(v.Gates); counts != "" {
		v.Summary += " (" + counts + ")"
	}
	if j.baseline == nil || !v.Passed || j.allowTestChanges {
		return v
	}
	if lost := gate.LostTests(base, v.Gates); len(lost) > 0 {
		list := strings.Join(lost, ", ")
		v.Passed = false
		v.Summary = "tests that passed before now do not: " + list
		v.Failure = "You claimed completion, but tests that passed before your change no longer pass (skipped, failing, or no longer run): " + list +
			". Fix the code so they pass again; do not skip, delete, rename or exclude tests (a story that must remove tests says allow_test_changes: true, which only a person sets)."
	}
	return v
}

// tolerateBaseFailures lets a verdict that failed only on gates that
// failed at the base too pass: each such gate is passed over and the
// gates after it run. The tests such a gate passed at the base must
// still pass (LostTests), so the item cannot make it worse unseen.
func tolerateBaseFailures(ctx context.Context, a *engine.Attempt, v engine.Verdict, runner gate.Runner, gates []gate.Gate, base []gate.Result) engine.Verdict {
	failedAtBase := func(r gate.Result) bool {
		return slices.ContainsFunc(base, func(b gate.Result) bool { return !b.Passed && b.Name == r.Name && b.Command == r.Command })
	}
	if v.Passed || len(v.Gates) == 0 || !failedAtBase(v.Gates[len(v.Gates)-1]) {
		return v
	}
	results := v.Gates
	ok := true
	for len(results) < len(gates) && ctx.Err() == nil {
		last := results[len(results)-1]
		if !last.Passed && !failedAtBase(last) {
			ok = false
			break
		}
		more, _ := runner.Run(ctx, a.Dir, gates[len(results):], logOf(a))
		if len(more) == 0 {
			break
		}
		results = append(results, more...)
	}
	var tolerated []string
	for _, r := range results {
		switch {
		case r.Passed:
		case failedAtBase(r):
			tolerated = append(tolerated, r.Name)
		default:
			ok = false
		}
	}
	if len(results) < len(gates) || ctx.Err() != nil {
		ok = false
	}
	v.Gates, v.Passed = results, ok
	v.Summary = gate.Summary(results) + " (" + strings.Join(tolerated, ", ") + " failed at the base too)"
	v.Failure = ""
	if !ok {
		v.Failure = "You claimed completion, but the harness's checks failed:\n\n" + gate.FailureContext(slices.DeleteFunc(slices.Clone(results), failedAtBase), 4<<10)
	}
	return v
}

// BaselineFailure is the error of a run whose base fails a run-wide gate:
// nothing ran, nothing is blamed.
type BaselineFailure struct{ B *Baseline }

func (e *BaselineFailure) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "the base %s already fails before any agent ran:", short(e.B.Commit))
	for _, r := range e.B.Failing() {
		fmt.Fprintf(&b, "\n\ngate %s (`%s`) FAILED with exit code %d:\n%s", r.Name, r.Command, r.ExitCode, gate.Trim(strings.TrimSpace(r.Output), 4<<10))
	}
	if slices.ContainsFunc(e.B.Failing(), func(r gate.Result) bool { return sandbox.CausedBy(r.Output) }) {
		// Not the base's fault: say what to allow (each note names it).
		b.WriteString("\n\nthe sandbox refused what a gate needed (the lines \"" + strings.TrimSpace(sandbox.NotePrefix) + " …\" above name it and the setting in your own config that allows it): allow it there, or run with --no-sandbox;")
		b.WriteString(" if the base fails anyway, ")
	} else {
		b.WriteString("\n\n")
	}
	b.WriteString("fix the base (or the gate) first, or run with --allow-failing-baseline to go on: a gate that fails at the base then need not pass, and the tests that pass there must still pass")
	return b.String()
}

// UsageError makes it exit 2: the run's input is wrong, not a story.
func (e *BaselineFailure) UsageError() bool { return true }
