package source

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/git"
	"github.com/ralph-loop/ralph/internal/judge"
	"github.com/ralph-loop/ralph/internal/prd"
	"github.com/ralph-loop/ralph/internal/runfolder"
	"github.com/ralph-loop/ralph/internal/store"
	"github.com/ralph-loop/ralph/internal/usage"
)

// Trailers of the commits a cadence records.
const (
	reviewTrailer   = "Ralph-Review"
	steeringTrailer = "Ralph-Steering"
)

// Item kinds and ids of the cadence's own iterations. Story ids may not
// take these prefixes (steering is refused one that does).
const (
	kindReview   = "review"
	kindSteering = "steering"
	reviewID     = "review-"
	steeringID   = "steering-"
)

// Review modes: why a review runs.
const (
	modePeriodic = "periodic" // the scheme's rhythm
	modeAdhoc    = "adhoc"    // control.json asked for one
	modeFinal    = "final"    // a worker wrote output/worker_result.json
)

// Cadence runs a run folder's PRD with the worker/reviewer rhythm:
// after every n worker iterations, m review iterations (the reviewer
// role), each writing review.md with "STEERING_NEEDED: yes|no"; a yes runs
// a steering iteration that may reshape the stories of prd.json under the
// PRD's validation, never their passes. Reviews and steering are items of
// their own (review-N, steering-N), judged here and committed on the
// feature branch like stories — through the same guard — so "passed"
// still means a verified commit. The rhythm's state is loop_state.json,
// the run's control plane, rewritten before every iteration and checked
// after it.
type Cadence struct {
	*PRD
	Dir   string // the run folder
	Root  string
	Orch  runfolder.OrchestrationFile
	mu    sync.Mutex
	ls    runfolder.LoopStateFile
	wrote []byte // loop_state.json as ralph last wrote it
}

// OpenCadence wraps a run folder's PRD source with its cadence; the loop
// state left by an earlier process is picked up (a malformed one is an
// error naming it).
func OpenCadence(p *PRD, root, dir string, o runfolder.OrchestrationFile) (*Cadence, error) {
	for _, st := range p.Doc.Stories {
		if reservedID(st.ID) {
			return nil, usage.Errorf("%s: story id %q: ids starting with %q or %q are the cadence's own (reviews and steering)", p.File, st.ID, reviewID, steeringID)
		}
	}
	c := &Cadence{PRD: p, Dir: dir, Root: root, Orch: o}
	ok, err := runfolder.ReadJSON(c.path(runfolder.LoopState), &c.ls)
	if err != nil {
		return nil, usage.Errorf("%v (ralph writes this file: delete it to start the cadence afresh)", err)
	}
	if !ok {
		c.ls = runfolder.LoopStateFile{Phase: "worker"}
	}
	// The files a person or a worker writes are checked before anything
	// starts (Next reads them again before every iteration).
	if _, err := runfolder.ReadJSON(c.path(runfolder.Control), &runfolder.ControlFile{}); err != nil {
		return nil, usage.Errorf("%v", err)
	}
	if _, err := runfolder.ReadJSON(c.path(runfolder.WorkerResult), &runfolder.WorkerResultFile{}); err != nil {
		return nil, usage.Errorf("%v", err)
	}
	c.ls.Scheme = o.Scheme
	return c, nil
}

func reservedID(id string) bool {
	return strings.HasPrefix(id, reviewID) || strings.HasPrefix(id, steeringID)
}

func (c *Cadence) path(name string) string { return filepath.Join(c.Dir, filepath.FromSlash(name)) }

func (c *Cadence) rel(name string) string {
	r, err := filepath.Rel(c.Root, c.path(name))
	if err != nil {
		return name
	}
	return filepath.ToSlash(r)
}

// Next serves, in order: the steering a review asked for; a review that
// failed and is redone; a review a person asked for (control.json); the
// final review a worker asked for (output/worker_result.json); the rest
// of a review round, or a new one once n worker iterations ran; else the
// PRD's next story; and when every story passes, a final review of the
// worker iterations since the last review. It only reads: what it serves
// is consumed by Prepare.
func (c *Cadence) Next(st *engine.State, busy map[string]bool) (*engine.Item, error) {
	c.mu.Lock()
	ls := c.ls
	c.mu.Unlock()
	if ls.SteeringDue {
		return c.steeringItem(ls.Steerings + 1), nil
	}
	if id := fmt.Sprintf("%s%d", reviewID, ls.Reviews+1); ls.Item == id {
		if is := st.Items[id]; is != nil && is.Status != engine.ItemPassed && is.Status != engine.ItemBlocked && !busy[id] {
			return c.reviewItem(ls.Reviews+1, ls.ReviewMode), nil
		}
	}
	var ctl runfolder.ControlFile
	if ok, err := runfolder.ReadJSON(c.path(runfolder.Control), &ctl); err != nil {
		return nil, usage.Errorf("%v", err)
	} else if ok && ctl.ReviewRequested {
		return c.reviewItem(ls.Reviews+1, modeAdhoc), nil
	}
	var wr runfolder.WorkerResultFile
	if ok, err := runfolder.ReadJSON(c.path(runfolder.WorkerResult), &wr); err != nil {
		return nil, usage.Errorf("%v", err)
	} else if ok && wr.Complete {
		it := c.reviewItem(ls.Reviews+1, modeFinal)
		it.RoleWhy = c.rel(runfolder.WorkerResult) + " says the work is done: a final review decides"
		return it, nil
	}
	next, err := c.PRD.Next(st, busy)
	if err != nil {
		return nil, err
	}
	if next == nil {
		if ls.WorkersSinceReview > 0 && c.allPassed(st) {
			it := c.reviewItem(ls.Reviews+1, modeFinal)
			it.RoleWhy = "every story passes: a final review decides whether the run is complete"
			return it, nil
		}
		return nil, nil
	}
	if ls.ReviewsLeft > 0 || ls.WorkersSinceReview >= c.Orch.Workers {
		return c.reviewItem(ls.Reviews+1, modePeriodic), nil
	}
	return next, nil
}

// allPassed: every story of the PRD passes (the run would be complete).
func (c *Cadence) allPassed(st *engine.State) bool {
	c.prdDoc.mu.Lock()
	defer c.prdDoc.mu.Unlock()
	for _, s := range c.Doc.Stories {
		if is := st.Items[s.ID]; is == nil || is.Status != engine.ItemPassed {
			return false
		}
	}
	return true
}

// Unfinished says why the run is not complete though every story passed:
// the last review was the final one and it was given up on (it never
// wrote its review), so nothing confirmed the work is done.
func (c *Cadence) Unfinished(st *engine.State) string {
	c.mu.Lock()
	ls := c.ls
	c.mu.Unlock()
	if ls.ReviewMode != modeFinal || ls.Reviews == 0 {
		return ""
	}
	id := fmt.Sprintf("%s%d", reviewID, ls.Reviews)
	is := st.Items[id]
	if is == nil || is.Status != engine.ItemBlocked {
		return ""
	}
	return fmt.Sprintf("every story passed, but the final review %s was blocked (%s): nothing confirmed the run is complete; to ask for a final review again, write %s with {\"complete\": true} and run again",
		id, is.Reason, c.rel(runfolder.WorkerResult))
}

// Lookup finds a review or steering item by id (they are not among the
// PRD's Items): the engine finishes an iteration a crash interrupted.
func (c *Cadence) Lookup(id string) *engine.Item {
	for _, p := range []string{reviewID, steeringID} {
		num, ok := strings.CutPrefix(id, p)
		if !ok {
			continue
		}
		n, err := strconv.Atoi(num)
		if err != nil || n < 1 {
			return nil
		}
		if p == steeringID {
			return c.steeringItem(n)
		}
		c.mu.Lock()
		mode := c.ls.ReviewMode
		if c.ls.Item != id || mode == "" {
			mode = modePeriodic
		}
		c.mu.Unlock()
		return c.reviewItem(n, mode)
	}
	return nil
}

func (c *Cadence) reviewItem(n int, mode string) *engine.Item {
	id := fmt.Sprintf("%s%d", reviewID, n)
	why := map[string]string{
		modePeriodic: fmt.Sprintf("%s cadence: %s, then %s", c.Orch.Scheme, count(c.Orch.Workers, "worker iteration"), count(c.Orch.Reviewers, "review")),
		modeAdhoc:    c.rel(runfolder.Control) + " asked for a review",
		// The worker's result file is consumed when the review starts: a
		// retry must not send the reviewer looking for it.
		modeFinal: "the work was reported done: a final review decides whether the run is complete",
	}[mode]
	desc := fmt.Sprintf(`Task envelope:
- phase: review
- review_mode: %s
- scheme: %s

Review the run so far: the stories in %s (which pass, which remain), the commits on %s (`+"`git log`"+`, `+"`git diff`"+`), %s and the code. %s

Write your review to %s: what is done well, what drifted from %s, what is missing or wrong, and whether the remaining stories still lead to the goal. It must contain one line that says exactly

STEERING_NEEDED: yes

or

STEERING_NEEDED: no

"yes" when the stories need reshaping (a story too big, missing, wrong or in the wrong order): a steering iteration follows and edits %s. Change no other file: no code, no stories (steering does that). You may set "steering_requested": true in %s, and nothing else there.`,
		mode, c.Orch.Scheme, c.rel(runfolder.PRDJSON), c.Branch, c.rel(runfolder.Progress),
		map[string]string{modePeriodic: "This is the periodic review of the cadence.", modeAdhoc: "A person asked for this review.",
			modeFinal: "A worker says every story is done: decide whether the run really is complete. Say STEERING_NEEDED: yes if work is missing, and name it."}[mode],
		c.rel(runfolder.Review), c.rel(runfolder.PRDMarkdown), c.rel(runfolder.PRDJSON), c.rel(runfolder.LoopState))
	return &engine.Item{ID: id, Title: mode + " review " + strconv.Itoa(n), Kind: kindReview, Branch: c.Branch,
		Description: desc, Role: "reviewer", RoleWhy: why, RoleText: reviewRole}
}

func (c *Cadence) steeringItem(n int) *engine.Item {
	desc := fmt.Sprintf(`Task envelope:
- phase: steering

The last review (%s) asked for steering. Read it, then reshape the stories in %s so that the remaining work leads to the goal in %s: add stories, split a story that is too big into smaller ones, reorder them (priority, depends_on), reword titles, descriptions and acceptance criteria. Keep every story small (one iteration), with objective acceptance criteria.

Rules (ralph checks them, and undoes an edit that breaks one, with the reason):
- never set or clear "passes": ralph marks stories passed, and only after their checks pass;
- never remove or rename a story that passes;
- never change quality_checks or a story's checks, nor give a new story checks;
- ids starting with %q or %q are ralph's;
- the file must stay a valid PRD (what `+"`ralph prd validate`"+` checks: ids, dependencies, no cycles).
You may also edit %s. Change no other file.`,
		c.rel(runfolder.Review), c.rel(runfolder.PRDJSON), c.rel(runfolder.PRDMarkdown), reviewID, steeringID, c.rel(runfolder.PRDMarkdown))
	return &engine.Item{ID: fmt.Sprintf("%s%d", steeringID, n), Title: "steering " + strconv.Itoa(n), Kind: kindSteering, Branch: c.Branch,
		Description: desc, Role: kindSteering, RoleWhy: "the review said STEERING_NEEDED: yes", RoleText: steeringRole}
}

// The reviewer's instructions on the cadence, in place of the reviewer
// role's prompt: its verdict is review.md's STEERING_NEEDED line, not a
// REVIEW: line.
const (
	reviewRole = `# Role: Reviewer (the run's cadence)

You review the run's work and its plan with a critical eye. You do not
implement anything and you do not edit the stories.

## This Iteration
- Read the spec, the stories, the progress notes and the commits since the
  run began (` + "`git log`, `git diff`" + `).
- Look for: wrong or untested behaviour and edge cases, drift from the
  spec, stories that are missing, wrong, too big for one iteration or in
  the wrong order.
- Write your findings to the review file the task below names. Change no
  other file.

## Output
Your verdict is one line of the review file, exactly STEERING_NEEDED: yes
(the stories need reshaping: a steering iteration follows) or
STEERING_NEEDED: no. No REVIEW: line is needed.`

	steeringRole = `# Role: Reviewer, steering (the run's cadence)

A review asked for the plan to change. You reshape the stories; you do
not implement anything.

## This Iteration
- Read the last review, the spec and the stories.
- Edit the stories as the task below says, within its rules, and nothing
  else.

## Output
The edited stories file. ralph validates it and records the accepted
change in steering.md; an edit that breaks a rule is undone and the
reason given back to you.`
)

func count(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

func isCadence(it *engine.Item) bool { return it.Kind == kindReview || it.Kind == kindSteering }

// Prepare consumes what the item serves (the ad-hoc request, the worker's
// result, a new round) and writes loop_state.json, then readies the tree
// as the PRD does.
func (c *Cadence) Prepare(ctx context.Context, it *engine.Item, st *engine.State) (engine.Workspace, error) {
	c.mu.Lock()
	err := c.serve(it)
	c.mu.Unlock()
	if err != nil {
		return engine.Workspace{}, err
	}
	return c.PRD.Prepare(ctx, it, st)
}

// serve records the iteration about to run in the loop state. Called with
// c.mu held; an iteration run again after a failure consumes nothing new.
func (c *Cadence) serve(it *engine.Item) error {
	again := c.ls.Item == it.ID
	c.ls.Item = it.ID
	switch it.Kind {
	case kindReview:
		c.ls.Phase = kindReview
		mode, _, _ := strings.Cut(it.Title, " ")
		if !again {
			c.ls.ReviewMode = mode
			switch mode {
			case modePeriodic:
				if c.ls.ReviewsLeft == 0 {
					c.ls.ReviewsLeft = c.Orch.Reviewers
				}
				c.ls.WorkersSinceReview = 0
			case modeAdhoc:
				var ctl runfolder.ControlFile
				if _, err := runfolder.ReadJSON(c.path(runfolder.Control), &ctl); err != nil {
					return err
				}
				ctl.ReviewRequested = false
				if err := writeJSON(c.path(runfolder.Control), ctl); err != nil {
					return err
				}
			case modeFinal:
				c.ls.WorkersSinceReview = 0
				if err := os.Remove(c.path(runfolder.WorkerResult)); err != nil && !errors.Is(err, os.ErrNotExist) {
					return err
				}
			}
		}
	case kindSteering:
		c.ls.Phase = kindSteering
	default:
		c.ls.Phase = "worker"
	}
	return c.writeState()
}

// writeState writes loop_state.json. Called with c.mu held.
func (c *Cadence) writeState() error {
	b, err := json.MarshalIndent(c.ls, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return err
	}
	if err := store.WriteFile(c.path(runfolder.LoopState), b, 0o644); err != nil {
		return err
	}
	c.wrote = b
	return nil
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return store.WriteFile(path, append(b, '\n'), 0o644)
}

// checkState compares loop_state.json with what ralph wrote before the
// iteration. A review may set steering_requested; any other edit is put
// back and reported. Called with c.mu held.
func (c *Cadence) checkState(kind string) (tampered string) {
	b, err := os.ReadFile(c.path(runfolder.LoopState))
	if err == nil && bytes.Equal(b, c.wrote) {
		return ""
	}
	var got runfolder.LoopStateFile
	if err == nil && json.Unmarshal(b, &got) == nil && kind == kindReview {
		want := c.ls
		want.SteeringRequested = got.SteeringRequested
		if got == want {
			c.ls.SteeringRequested = got.SteeringRequested
			_ = c.writeState()
			return ""
		}
	}
	_ = c.writeState()
	who := map[string]string{kindReview: "the review", kindSteering: "the steering iteration"}[kind]
	if who == "" {
		who = "the worker"
	}
	allowed := "it must not edit it"
	if kind == kindReview {
		allowed = "a review may set steering_requested and nothing else"
	}
	return fmt.Sprintf("%s edited %s (the control plane: %s, see %s); restored", who, c.rel(runfolder.LoopState), allowed, c.rel(runfolder.ControlPlane))
}

// Claim is the PRD's for a worker iteration, refused when it edited the
// loop state; a review or steering iteration is judged by the run
// folder's own contract (Claim.Judged).
func (c *Cadence) Claim(ctx context.Context, a *engine.Attempt, st *engine.State) judge.Claim {
	if !isCadence(a.Item) {
		cl := c.PRD.Claim(ctx, a, st)
		c.mu.Lock()
		t := c.checkState("worker")
		c.ls.WorkersSinceReview++
		_ = c.writeState()
		c.mu.Unlock()
		if t != "" {
			cl.Tampered = append(cl.Tampered, t)
			cl.Refused = &engine.Verdict{Claimed: true, Summary: "tampering: " + t,
				Failure: "The previous iteration edited " + c.rel(runfolder.LoopState) + ", which only ralph writes (workers must not edit it; " + c.rel(runfolder.ControlPlane) + "). It was restored and the story did not pass."}
		}
		return cl
	}
	cl := c.Terms(a.Item, st)
	v := c.verifyOwn(ctx, a, st)
	cl.Judged, cl.Tampered = &v, v.Tampered
	if v.Passed {
		it := a.Item
		cl.Subject = fmt.Sprintf("review(%s): %s", strings.TrimPrefix(it.ID, reviewID), v.Summary)
		if it.Kind == kindSteering {
			cl.Subject = fmt.Sprintf("steer(%s): %s", strings.TrimPrefix(it.ID, steeringID), strings.TrimPrefix(v.Summary, "steering: "))
			// The model takes the steered stories, and steering.md records
			// them: both are in the tree the steering's commit holds.
			if err := c.adopt(); err == nil {
				err = c.recordSteering(ctx, it, v.Summary)
			}
		}
	}
	return cl
}

// Terms of a review or steering: the feature branch, its trailer; its
// contract is the run folder's (Claim.Judged), not a story's.
func (c *Cadence) Terms(it *engine.Item, st *engine.State) judge.Claim {
	if !isCadence(it) {
		return c.PRD.Terms(it, st)
	}
	key := reviewTrailer
	if it.Kind == kindSteering {
		key = steeringTrailer
	}
	c.prdDoc.mu.Lock()
	tip := c.resumedTip
	c.prdDoc.mu.Unlock()
	return judge.Claim{Target: c.Branch, Tip: tip, Claimed: true, Subject: it.Title, Trailers: itemTrailers(key, it.ID, st.RunID)}
}

// Landed moves the loop state past a review or steering; a story is the
// PRD's.
func (c *Cadence) Landed(ctx context.Context, a *engine.Attempt, v engine.Verdict, commit string, st *engine.State) error {
	if !isCadence(a.Item) {
		return c.PRD.Landed(ctx, a, v, commit, st)
	}
	c.advance(a.Item, v.Summary)
	return nil
}

var steeringLine = regexp.MustCompile(`(?mi)^\W{0,4}STEERING_NEEDED\W{0,4}:\W{0,4}(yes|no)\b`)

// verifyOwn judges a review or steering iteration: the branch guard, the
// loop state, the files it may change (anything else is parked on a side
// branch and the tree reset to where it started), then review.md's
// STEERING_NEEDED line, or the reshaped prd.json.
func (c *Cadence) verifyOwn(ctx context.Context, a *engine.Attempt, st *engine.State) engine.Verdict {
	it := a.Item
	repo := c.Git.At(a.Dir)
	base := baseOf(st, it.ID)
	c.mu.Lock()
	tampered := c.checkState(it.Kind)
	c.mu.Unlock()
	var ts []string
	if tampered != "" {
		ts = append(ts, tampered)
	}
	fail := func(summary, failure string) engine.Verdict {
		return engine.Verdict{Tampered: ts, Summary: summary, Failure: failure}
	}
	if tampered != "" {
		c.restore("")
		return fail("tampering: "+tampered, "You edited "+c.rel(runfolder.LoopState)+" beyond what your role may ("+c.rel(runfolder.ControlPlane)+"). It was restored; do the "+it.Kind+" again.")
	}
	allowed := map[string]bool{c.rel(runfolder.Progress): true}
	if it.Kind == kindReview {
		allowed[c.rel(runfolder.Review)] = true
	} else {
		allowed[c.rel(runfolder.PRDJSON)] = true
		allowed[c.rel(runfolder.PRDMarkdown)] = true
		allowed[c.rel(runfolder.Steering)] = true
	}
	changed, err := changedSince(ctx, repo, base, st.Preexisting)
	if err != nil {
		return fail("listing the changed files failed", err.Error())
	}
	var other []string
	for _, f := range changed {
		if !allowed[f] {
			other = append(other, f)
		}
	}
	if len(other) > 0 {
		side, err := parkWork(ctx, repo, "tampered", it.ID, st.RunID, st.Preexisting, fmt.Sprintf("wip(%s): files a %s may not change", it.ID, it.Kind), true)
		if err == nil {
			err = repo.Checkout(ctx, c.Branch)
		}
		if err == nil && base != "" {
			err = repo.ResetHard(ctx, base)
		}
		if err != nil {
			return fail("setting the changes aside failed", err.Error())
		}
		c.restore("")
		what := strings.Join(other, ", ")
		ts = append(ts, fmt.Sprintf("the %s changed %s, which it may not; its work is kept on %s and the tree is back where it started", it.Kind, what, side))
		return fail(fmt.Sprintf("the %s changed files it may not: %s", it.Kind, what),
			fmt.Sprintf("A %s changes only %s. The previous one also changed %s; all of its work was set aside on %s. Do the %s again, changing only those files.",
				it.Kind, strings.Join(sortedKeys(allowed), ", "), what, side, it.Kind))
	}
	if it.Kind == kindReview {
		return c.judgeReview(ctx, repo, a, st, changed)
	}
	return c.judgeSteering(ctx, repo, a, st)
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// changedSince lists the files changed since base: committed by the agent
// and in the tree (the user's pre-existing files left out).
func changedSince(ctx context.Context, repo *git.Repo, base string, preexisting []string) ([]string, error) {
	files, err := repo.Changed(ctx, repo.Dir, preexisting...)
	if err != nil {
		return nil, err
	}
	if head, err := repo.Head(ctx); err == nil && base != "" && head != base {
		committed, err := repo.DiffTrees(ctx, base, head)
		if err != nil {
			return nil, err
		}
		files = union(files, committed)
	}
	return files, nil
}

func (c *Cadence) judgeReview(ctx context.Context, repo *git.Repo, a *engine.Attempt, st *engine.State, changed []string) engine.Verdict {
	rel := c.rel(runfolder.Review)
	c.restore("") // prd.json is not the review's to change
	if !slices.Contains(changed, rel) {
		return engine.Verdict{Summary: "no review written", Failure: fmt.Sprintf("The review must write %s (with a line STEERING_NEEDED: yes or STEERING_NEEDED: no); this iteration did not change it.", rel)}
	}
	b, err := store.ReadFileLimit(c.path(runfolder.Review), 1<<20)
	m := steeringLine.FindSubmatch(b)
	if err != nil || m == nil {
		return engine.Verdict{Summary: "review.md has no STEERING_NEEDED line", Failure: fmt.Sprintf("%s must contain one line that says exactly STEERING_NEEDED: yes or STEERING_NEEDED: no; it does not. Write the review again with that line.", rel)}
	}
	need := strings.ToLower(string(m[1]))
	mode, _, _ := strings.Cut(a.Item.Title, " ")
	return engine.Verdict{Passed: true, Claimed: true, Summary: fmt.Sprintf("%s review: STEERING_NEEDED: %s", mode, need)}
}

// judgeSteering checks the reshaped prd.json against the harness's model:
// valid, gates untouched, no passes set or cleared, no passing story
// removed, no reserved id. A rejected edit is undone (the model written
// back) and the reason fed back; an accepted one is recorded in
// steering.md, which the commit carries.
func (c *Cadence) judgeSteering(ctx context.Context, repo *git.Repo, a *engine.Attempt, st *engine.State) engine.Verdict {
	b, rerr := os.ReadFile(c.File)
	reject := func(why []string) engine.Verdict {
		c.restore("")
		return engine.Verdict{Summary: "steering rejected: " + why[0],
			Failure: fmt.Sprintf("Your edit of %s was rejected and undone:\n- %s\nEdit it again within the rules.", c.rel(runfolder.PRDJSON), strings.Join(why, "\n- "))}
	}
	if rerr != nil {
		return reject([]string{rerr.Error()})
	}
	disk, err := prd.Parse(c.File, b)
	if err == nil {
		err = disk.Validate()
	}
	if err != nil {
		return reject([]string{err.Error()})
	}
	c.prdDoc.mu.Lock()
	model := c.Doc
	c.prdDoc.mu.Unlock()
	var why []string
	if !steeredGatesSame(disk, model) {
		why = append(why, "the gate commands (quality_checks, a story's checks) changed; they are a person's")
	}
	if disk.BranchName != model.BranchName && disk.BranchName != "" {
		why = append(why, "branch_name changed")
	}
	onDisk := storiesByID(disk)
	inModel := storiesByID(model)
	for _, s := range model.Stories {
		d := onDisk[s.ID]
		switch {
		case d == nil && s.Passes:
			why = append(why, fmt.Sprintf("%s passes and was removed (or renamed)", s.ID))
		case d != nil && d.Passes != s.Passes:
			why = append(why, fmt.Sprintf("\"passes\" of %s changed to %v; only ralph sets it", s.ID, d.Passes))
		}
	}
	for _, d := range disk.Stories {
		if inModel[d.ID] != nil {
			continue
		}
		if d.Passes {
			why = append(why, fmt.Sprintf("new story %s has \"passes\": true; only ralph sets it", d.ID))
		}
		if reservedID(d.ID) {
			why = append(why, fmt.Sprintf("story id %q starts with %q or %q, which are ralph's", d.ID, reviewID, steeringID))
		}
	}
	if len(why) > 0 {
		return reject(why)
	}
	summary := steeringSummary(model, disk)
	return engine.Verdict{Passed: true, Claimed: true, Summary: "steering: " + summary}
}

func (c *Cadence) lastReview() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ls.Reviews == 0 {
		return "a request in " + c.rel(runfolder.LoopState)
	}
	return fmt.Sprintf("%s%d", reviewID, c.ls.Reviews)
}

// steeredGatesSame: a steering left every gate command as it was — the
// PRD's quality checks and the checks of each story it kept — and gave
// the stories it added none (sameGates wants the same stories in both).
func steeredGatesSame(disk, model *prd.PRD) bool {
	if disk.QualityChecks != model.QualityChecks {
		return false
	}
	inModel := storiesByID(model)
	for i := range disk.Stories {
		d := &disk.Stories[i]
		m := inModel[d.ID]
		if m == nil {
			if len(d.Checks) > 0 || d.AllowGateChanges || d.AllowTestChanges {
				return false
			}
		} else if !slices.Equal(d.Checks, m.Checks) || d.AllowGateChanges != m.AllowGateChanges || d.AllowTestChanges != m.AllowTestChanges {
			return false
		}
	}
	return true
}

// steeringSummary says what a steering did to the stories: added, removed,
// reworded, reordered.
func steeringSummary(model, disk *prd.PRD) string {
	inModel, onDisk := storiesByID(model), storiesByID(disk)
	var added, removed, changed []string
	for i := range disk.Stories {
		d := &disk.Stories[i]
		m := inModel[d.ID]
		if m == nil {
			added = append(added, d.ID)
			continue
		}
		mc, dc := *m, *d
		mc.Passes, dc.Passes = false, false
		if !mc.Equal(&dc) {
			changed = append(changed, d.ID)
		}
	}
	for _, m := range model.Stories {
		if onDisk[m.ID] == nil {
			removed = append(removed, m.ID)
		}
	}
	var order []string
	for _, d := range disk.Stories {
		if inModel[d.ID] != nil {
			order = append(order, d.ID)
		}
	}
	var was []string
	for _, m := range model.Stories {
		if onDisk[m.ID] != nil {
			was = append(was, m.ID)
		}
	}
	var parts []string
	for _, p := range []struct {
		what string
		ids  []string
	}{{"added", added}, {"removed", removed}, {"changed", changed}} {
		if len(p.ids) > 0 {
			parts = append(parts, p.what+" "+strings.Join(p.ids, ", "))
		}
	}
	if !slices.Equal(order, was) {
		parts = append(parts, "reordered")
	}
	if len(parts) == 0 {
		return "no change to the stories"
	}
	return strings.Join(parts, "; ")
}

// recordSteering appends the accepted steering to steering.md: what it did
// to the stories and the diff of prd.json (as ralph writes it back), so
// the steering commit carries its own record.
func (c *Cadence) recordSteering(ctx context.Context, it *engine.Item, summary string) error {
	n := strings.TrimPrefix(it.ID, steeringID)
	entry := fmt.Sprintf("\n## Steering %s · %s · after %s\n\n%s\n", n, time.Now().UTC().Format(time.RFC3339), c.lastReview(), strings.TrimPrefix(summary, "steering: "))
	if diff, err := c.Git.Run(ctx, "diff", "--no-ext-diff", "HEAD", "--", c.File); err == nil && diff != "" {
		entry += "\n```diff\n" + diff + "\n```\n"
	}
	p := c.path(runfolder.Steering)
	if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
		entry = "# Steering\n\nEach steering ralph accepted: what it did to the stories, and the diff of prd.json.\n" + entry
	}
	return store.AppendLog(p, []byte(strings.TrimRight(entry, "\n")))
}

// adopt makes the steered prd.json the harness's model (passes as they
// were, which judgeSteering checked) and writes it back in the model's
// format.
func (c *Cadence) adopt() error {
	b, err := os.ReadFile(c.File)
	if err != nil {
		return err
	}
	disk, err := prd.Parse(c.File, b)
	if err != nil {
		return err
	}
	c.prdDoc.mu.Lock()
	defer c.prdDoc.mu.Unlock()
	c.Doc = disk
	return c.write()
}

// advance moves the loop state past a review or steering that is done
// (passed or given up on). It is idempotent: a crash between the commit
// and the state's save recovers the item and advances again.
func (c *Cadence) advance(it *engine.Item, summary string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch it.Kind {
	case kindReview:
		n, _ := strconv.Atoi(strings.TrimPrefix(it.ID, reviewID))
		if n <= c.ls.Reviews {
			return
		}
		c.ls.Reviews = n
		if c.ls.ReviewMode == modePeriodic && c.ls.ReviewsLeft > 0 {
			c.ls.ReviewsLeft--
		}
		yes := strings.HasSuffix(summary, "STEERING_NEEDED: yes")
		forced := c.Orch.LoopSettings.ForceSteering && strings.Contains(summary, "STEERING_NEEDED")
		if yes || forced || c.ls.SteeringRequested {
			c.ls.SteeringDue = true
		}
	case kindSteering:
		n, _ := strconv.Atoi(strings.TrimPrefix(it.ID, steeringID))
		if n <= c.ls.Steerings {
			return
		}
		c.ls.Steerings = n
		c.ls.SteeringDue, c.ls.SteeringRequested = false, false
	}
	_ = c.writeState()
}

// Block gives up on a review or steering after its attempts (its work is
// parked as a story's would be) and moves the cadence on.
func (c *Cadence) Block(ctx context.Context, it *engine.Item, st *engine.State, reason string) error {
	err := c.PRD.Block(ctx, it, st, reason)
	if isCadence(it) {
		c.advance(it, "")
	}
	return err
}

// Recover finds a review's or steering's commit after a crash in its
// commit phase, and moves the cadence on as Accept would have.
func (c *Cadence) Recover(ctx context.Context, it *engine.Item, st *engine.State) (string, bool, error) {
	if !isCadence(it) {
		return c.PRD.Recover(ctx, it, st)
	}
	key := reviewTrailer
	if it.Kind == kindSteering {
		key = steeringTrailer
	}
	if sha := committedIn(ctx, c.Git, "HEAD", key, it.ID, st.RunID); sha != "" {
		c.recovered(ctx, sha)
		if err := c.followRecovered(ctx); err != nil {
			return "", false, err
		}
		if it.Kind == kindSteering {
			if err := c.adopt(); err != nil {
				return "", false, err
			}
		}
		summary, _ := c.Git.Run(ctx, "log", "-1", "--format=%s", sha)
		c.advance(it, summary)
		return sha, true, nil
	}
	return "", false, nil
}
