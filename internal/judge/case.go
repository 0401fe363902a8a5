package judge

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/ralph-loop/ralph/internal/gate"
	"github.com/ralph-loop/ralph/internal/git"
	"github.com/ralph-loop/ralph/internal/land"
)

// Claim is a source's word on an iteration: what the work is, whether the
// agent claims it done by the source's own signals, and what applies. A
// source never judges; it says this and the judge decides.
type Claim struct {
	// Claimed: the source's own signals say done (a story's passes:true,
	// a task marked complete), besides the completion promise.
	Claimed bool
	// Unclaimed is the verdict of an iteration that claims nothing: what
	// the next agent is told.
	Unclaimed Verdict
	// Refused, when set, fails the claim for a reason of the source's own
	// (conflict markers left, the task gone, invalid edits to the task
	// file): nothing is recorded or run.
	Refused *Verdict
	// Tampered is what the source found and put back of its own files
	// (a flipped passes, an edited gate command).
	Tampered []string
	// Gates are the run-wide gates, Checks the item's own.
	Gates  []gate.Gate
	Checks []gate.Gate
	// AllowTestChanges and AllowGateChanges are set by a person on the
	// item: its protected files, and the files its gates run, may change.
	AllowTestChanges bool
	// Protect are more globs of files the agent may not change, the
	// work's own (a PRD's "protected"), besides the judge's.
	Protect          []string
	AllowGateChanges bool
	// Review names the role whose approval is the item's evidence (a
	// person asked for a review instead of a test).
	Review string
	// Target is the branch the work lands on (the lander's), and Own the
	// branch of the item's own tree when it has one (a story's worktree, a
	// task's branch); "" when the agent works on Target itself.
	Target string
	Own    string
	// Tip is the newest commit ralph knows landed on Target (a resumed
	// run's), "" for the branch as it is: a branch that no longer holds it
	// was rewritten while ralph was not running, and is put back.
	Tip string
	// Onto is the commit the work tree's content is built on when that is
	// not the item's base (the plain loop, whose every iteration's work
	// lands): the item's changes are still counted from its base.
	Onto string
	// Exclude are paths never recorded as work (a task tree's files).
	Exclude []string
	// Merging: ralph left a merge in progress in the tree (a conflict for
	// a resolver), so its merge state is not the agent's.
	Merging bool
	// Subject, Body and Trailers make the commit message; the judge adds
	// the "Verified by ralph" line.
	Subject  string
	Body     []string
	Trailers []string
	// Mark returns ralph's bookkeeping for the item's commit (the PRD with
	// the story marked passed, a plan's ticked box): repository-relative
	// paths and their bytes. onTip says the work is built on the branch's
	// tip as the source knows it (its own model is the file then); else
	// parent tells how a path reads in the tree the work is built on (a
	// story ahead of it in the queue marked there; nil when it has none).
	Mark func(parent func(path string) []byte, onTip bool) (map[string][]byte, error)
	// Bookkeeping are paths that do not count as work (progress files).
	Bookkeeping []string
	// Condition, when set, is the item's own acceptance (a pipeline
	// stage's exit condition), asked on the judged checkout: whether it
	// holds, a line that says so, and what the next agent is told when it
	// does not.
	Condition func(ctx context.Context, dir string) (met bool, detail, failure string)
	// Own, when set, is the source's verdict on an item it judges by its
	// own contract (a run folder's review or steering): the judge still
	// restores what the agent must not touch, and records and lands the
	// work when it passed.
	Judged *Verdict
	// NoLand: with a Judged verdict that passed, there is nothing to
	// record or land (a task split into subtasks that left no work).
	NoLand bool
	// KeepWork, when set, is the message an iteration that does not pass
	// records its work with on the branch, unverified (the plain loop's
	// memory).
	KeepWork string
	// Commands are other commands the judge runs besides the gates (a
	// stage's exit condition): the files they run are guarded alike.
	Commands []string
	// NoEvidence: the item has no acceptance contract beyond its gates
	// (the plain loop, which ends on the promise): a claim needs real work
	// and green tests, not evidence.
	NoEvidence bool
}

// Restorer puts the run's pinned policy back where an agent changed it
// (internal/policy) and says what it found.
type Restorer interface {
	Restore(dir string) []string
}

// Case is one iteration to judge.
type Case struct {
	Item      string
	Title     string
	Kind      string // story | task | stage | loop
	Iteration int
	Attempt   int
	RunID     string
	// Role is the iteration's role ("" a worker); Approved: it said
	// REVIEW: approve. Rejected holds a role's findings when it did not.
	Role     string
	Approved bool
	Rejected string
	// Dir is the agent's work tree; Base the item's base commit.
	Dir  string
	Base string
	// Claimed: the completion promise was in the final message.
	Claimed bool
	// AgentFailed is set when the agent's run did not finish.
	AgentFailed *Verdict
	// Preexisting are the user's files that were dirty before the run:
	// never committed.
	Preexisting []string
	// Since is when the run took its environment: hooks and config
	// written after it are the run's.
	Since time.Time
	// RefsBefore are the repository's refs when the agent started.
	RefsBefore map[string]string
	Learnings  []string
	Log        io.Writer
	// Claim is the source's word. Until the judge reads it (Read, after
	// the run's policy is put back) it holds the item's terms.
	Claim Claim
	Read  func(ctx context.Context) Claim
	// Lander owns Claim.Target.
	Lander *land.Lander
	Policy Restorer

	// What the judging found, step by step.
	contract *Contract
	snap     *git.Snapshot
	own      string // the tree of the item's own work
	tree     string // the tree judged (own, merged onto the end of the queue)
	ticket   *land.Ticket
	changes  []git.Change // what the item's work changed from its base
	marked   []string     // the bookkeeping paths ralph wrote into the tree
	judgedBy string       // who ran the gates, when it is named (Judge.Here, a worker)
	results  []gate.Result
	base     []gate.Result // the run-wide gates' results at the base
	checks   []CheckResult
	evidence []Evidence
	stillRed []TestRef
	lost     []string
	notes    []string
	tampered []string
	failure  *Verdict
	// onAhead: the failure is a gate's on the work merged onto plans
	// ahead of it in the queue, which may be theirs.
	onAhead bool
	met     string // a condition's detail, when met
	// gitPaths are where the agent's work tree keeps its index and
	// MERGE_HEAD, asked once per case (gitPath).
	gitPaths map[string]string
	// prior is the judgement the case passed before it went stale: when
	// the work built anew is the very same tree, its results stand and no
	// gate runs again.
	prior *prior
}

// prior is what a passing judgement found on its tree.
type prior struct {
	tree     string
	results  []gate.Result
	base     []gate.Result
	evidence []Evidence
	stillRed []TestRef
	met      string
	judgedBy string
}

// claimed reports whether the iteration claims the item done.
func (c *Case) claimed() bool { return c.Claimed || c.Claim.Claimed || c.Approved }

// log is where the judge writes what it does (the transcript).
func (c *Case) log() io.Writer {
	if c.Log == nil {
		return io.Discard
	}
	return c.Log
}

// caseGitFiles are the work tree's own git files a judging reads.
var caseGitFiles = []string{"index", "MERGE_HEAD"}

// gitPath is where the agent's work tree keeps its git file name (one of
// caseGitFiles): the paths are asked once per case, in one git process.
func (c *Case) gitPath(ctx context.Context, j *Judge, name string) (string, error) {
	if c.gitPaths == nil {
		paths, err := j.Repo.At(c.Dir).GitPaths(ctx, caseGitFiles...)
		if err != nil {
			return "", err
		}
		c.gitPaths = map[string]string{}
		for i, n := range caseGitFiles {
			c.gitPaths[n] = paths[i]
		}
	}
	p, ok := c.gitPaths[name]
	if !ok {
		return "", fmt.Errorf("no git path %q asked for a case", name)
	}
	return p, nil
}
