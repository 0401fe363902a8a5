package judge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ralph-loop/ralph/internal/usage"

	"github.com/ralph-loop/ralph/internal/gate"
	"github.com/ralph-loop/ralph/internal/git"
	"github.com/ralph-loop/ralph/internal/land"
)

// Stage orders the checks: each stage runs on what the ones before made.
type Stage int

const (
	// Restore runs after every agent run, claimed or not: what the agent
	// must not change (the policy, refs, hooks, the repository's
	// indirections, the files the gates run) is put back and reported.
	Restore Stage = iota
	// Claiming: is there a claim to judge at all?
	Claiming
	// Record: the work becomes a tree, on the end of the lander's queue.
	Record
	// Commit runs on what the recorded work changed, before any gate.
	Commit
	// Gates runs the gates on a fresh checkout of exactly that tree.
	Gates
	// Result runs on the gates' results: tests, evidence.
	Result
)

// Check is one defence. A new defence is one Check (a file of its own)
// and one line in Checks.
type Check interface {
	// Name names the check in the judgement log ("protected files").
	Name() string
	Stage() Stage
	Check(ctx context.Context, j *Judge, c *Case) Finding
}

// Finding is what a check found.
type Finding struct {
	// Fail fails the claim (the later checks do not run).
	Fail *Verdict
	// Tampered is what the check found the agent did and put back.
	Tampered []string
	// Note is said with the verdict and in the log, failing nothing.
	Note string
	// Skipped: the check does not apply here (not listed).
	Skipped bool
	// Done: the judgement is complete and passed; nothing more runs (a
	// source's own contract with nothing to land).
	Done bool
}

// Checks are the judge's defences, in order within their stage.
func Checks() []Check {
	return []Check{
		policyCheck{},
		sourceCheck{},
		refsCheck{},
		hooksCheck{},
		repositoryCheck{},
		gateFilesCheck{},
		claimCheck{},
		recordStep{},
		nestedRepoCheck{},
		realWorkCheck{},
		protectedCheck{},
		secretsCheck{},
		gatesStep{},
		inventoryCheck{},
		lostTestsCheck{},
		evidenceCheck{},
	}
}

// Judge is a run's one judge: every driver's claims come here.
type Judge struct {
	Repo *git.Repo // the repository (its main work tree)
	// Gates runs gate commands (in the sandbox, as the CLI built it).
	Gates gate.Runner
	// View shows a checkout to the gates: the context and folder to run
	// them in (the sandbox shows the checkout at the repository's own
	// path; nil: the checkout's folder), and what to call once they ran,
	// before the checkout is used again.
	View func(ctx context.Context, checkout string) (context.Context, string, func())
	// Trees are the judge's checkouts; Baseline the run-wide gates'
	// results at bases.
	Trees    *Trees
	Baseline *Baseline
	// NoGates: the person started the run with nothing to check the
	// work by (--no-gates): an item with no gate, check or review then
	// passes on its real work, said not verified. Otherwise such an item
	// has no evidence and does not pass.
	NoGates bool
	// Protect are protected globs besides the test files (config, PRD).
	Protect []string
	// StateDir is ralph's folder (.ralph): the judgement logs.
	StateDir string
	// Secret names the secrets ralph masks that bytes hold, never the
	// secrets themselves (nil: none, or no masking).
	Secret func(b []byte) []string
	// Declarations lets a Go test file gain declarations (its own ones
	// must stay byte for byte); off, a protected file may not change.
	Declarations bool
	// Attested, when set, gives gate results that ran elsewhere (a worker
	// of `ralph coordinator`): they stand for exactly the tree they ran
	// on; otherwise the gates run here. Here names this judge on the
	// commits whose gates it ran ("" names nobody: a local run).
	Attested Attester
	Here     string
	checks   []Check

	mu sync.Mutex
	// alternates is objects/info/alternates as the run found it; hooksSeen
	// the core.hooksPath last reported.
	alternates []byte
	hooksSeen  string
	gitDir     string
	blobs      map[string]map[string]string // gate files' blob ids per commit
	checksAt   map[string]gate.Result       // a check's result at a base (commit + command)
	contracts  map[string]*Contract         // item + base
}

// New is the judge of a repository with the standard checks.
func New(repo *git.Repo, gates gate.Runner, stateDir string) (*Judge, error) {
	gitDir, err := repo.CommonDir(context.Background())
	if err != nil {
		return nil, err
	}
	j := &Judge{Repo: repo, Gates: gates, StateDir: stateDir, checks: Checks(), gitDir: gitDir}
	j.Trees = NewTrees(filepath.Join(stateDir, "judge"), gitDir, repo.Runner)
	j.alternates, _ = os.ReadFile(filepath.Join(gitDir, "objects", "info", "alternates"))
	return j, nil
}

// Open readies the judge for a run: the dependency folders the tree has
// now, taken as the base's (once per run: a resumed run keeps the ones
// its start took), and the run-wide gates on the base rev (the
// baseline). It returns what fails at the base (work for the run,
// listed up front, never blamed on an item) and the gates whose tests it
// cannot count. What a killed run's judging left (index files in .git,
// locks in the checkouts) goes first.
func (j *Judge) Open(ctx context.Context, runID, rev string, gates []gate.Gate, log io.Writer) (Opened, error) {
	git.RemoveDeadSnapshots(j.gitDir)
	j.Trees.RemoveLocks()
	root := j.Repo.Dir
	env, err := OpenEnv(ctx, j.Repo, root, filepath.Join(j.StateDir, "judge", "env"), runID)
	if err != nil {
		return Opened{}, err
	}
	j.Trees.Env.Close()
	j.Trees.Env = env
	if env != nil && slices.Contains(env.Names(), "node_modules") {
		if err := checkNodeLock(root, env.dir); err != nil {
			return Opened{}, err
		}
	}
	if len(gates) == 0 {
		return Opened{}, nil
	}
	b, err := j.TakeBaseline(ctx, runID, rev, gates, log)
	if err != nil || b == nil {
		return Opened{}, err
	}
	if caused := b.SandboxRed(); len(caused) > 0 {
		// Every item would be judged without that gate: the run does not
		// start until the person allows what it needs (the failing
		// result is taken again then, never replayed).
		return Opened{}, usage.Errorf("the base %s already fails before any agent ran, and the sandbox refused what a gate needed:\n  %s\nallow it in your own config as the line says, or run with --no-sandbox (see .ralph/baseline.log)", short(b.Commit), strings.Join(caused, "\n  "))
	}
	return Opened{Red: b.Red(), RedRefs: b.RedRefs(), NoInventory: gate.NoInventory(b.Results)}, nil
}

// Opened is what Open found at the base: Red, what fails there (each
// failing gate with the tests it names, a line each), and RedRefs the
// same named as verdicts name what is still red (gate: test, or the
// gate); NoInventory, the gates that run tests whose output ralph cannot
// read (it knows only their exit code).
type Opened struct {
	Red, RedRefs, NoInventory []string
}

// Begin is called before an item's agent runs: it pins the item's
// contract at its base (the protected files, which the agent's sandbox
// shows read-only) and takes the refs as they are. It returns the
// contract and the refs.
func (j *Judge) Begin(ctx context.Context, item, base string, claim Claim) (*Contract, map[string]string) {
	refs, _ := j.Repo.Refs(ctx)
	return j.contract(ctx, item, base, claim), refs
}

// Judge judges one iteration: every check in order, stopping at the first
// that fails the claim. The verdict carries the tree the gates judged and
// its place in the lander's queue when it passed.
func (j *Judge) Judge(ctx context.Context, c *Case) Verdict {
	if c.contract == nil {
		c.contract = j.contract(ctx, c.Item, c.Base, c.Claim)
	}
	for _, chk := range j.checks {
		if c.failure != nil && chk.Stage() > Restore {
			break
		}
		f := chk.Check(ctx, j, c)
		if ctx.Err() != nil && f.Fail == nil {
			f.Fail = fail("interrupted while judging", ctx.Err().Error())
		}
		c.tampered = append(c.tampered, f.Tampered...)
		if f.Note != "" {
			c.notes = append(c.notes, f.Note)
			fmt.Fprintf(c.log(), "ralph: %s\n", f.Note)
		}
		if f.Skipped {
			continue
		}
		r := CheckResult{Check: chk.Name(), OK: f.Fail == nil}
		if f.Fail != nil {
			r.Detail = f.Fail.Summary
			if c.failure == nil {
				c.failure = f.Fail
			}
		} else if len(f.Tampered) > 0 {
			r.Detail = strings.Join(f.Tampered, "; ")
		}
		c.checks = append(c.checks, r)
		if f.Done {
			break
		}
	}
	return j.conclude(ctx, c)
}

// Rejudge judges again work already judged once whose place in the queue
// went stale: the restore checks and the claim stand; the work is
// recorded and integrated anew on the queue's end.
func (j *Judge) Rejudge(ctx context.Context, c *Case) Verdict {
	j.rejudge(ctx, c)
	return j.conclude(ctx, c)
}

// conclude finishes the judgement. Gates that failed on the work merged
// onto plans ahead of it in the queue may have failed on those plans'
// work: the verdict waits until they landed (the failure stands: it is
// the work's on what landed) or left the queue unlanded (their own
// judgement failed), and then the work is judged again on the queue's
// end as it is now, rather than blamed for work that never lands.
func (j *Judge) conclude(ctx context.Context, c *Case) Verdict {
	for round := 0; round < maxRebuilds && c.failure != nil && c.onAhead && c.ticket != nil && ctx.Err() == nil; round++ {
		c.Lander.Wait(ctx, c.ticket.Plan().On)
		if !c.ticket.Stale() {
			break
		}
		fmt.Fprintf(c.log(), "ralph: %s's gates failed on it merged onto work ahead of it in the queue, which then left the queue without landing: judged again on %s as it is now\n", c.Item, c.Claim.Target)
		j.rejudge(ctx, c)
	}
	return j.finish(c)
}

// rejudge runs the checks after the claim again on the work recorded and
// integrated anew on the queue's end.
func (j *Judge) rejudge(ctx context.Context, c *Case) {
	if c.failure == nil && c.tree != "" {
		c.prior = &prior{tree: c.tree, results: c.results, base: c.base, evidence: c.evidence, stillRed: c.stillRed, met: c.met, judgedBy: c.judgedBy}
	}
	c.failure, c.checks, c.results, c.evidence, c.stillRed, c.lost, c.notes = nil, nil, nil, nil, nil, nil, nil
	c.onAhead = false
	c.judgedBy = ""
	c.ticket, c.tree = nil, ""
	c.snap.Remove()
	c.snap = nil
	for _, chk := range j.checks {
		if chk.Stage() <= Claiming {
			continue
		}
		if c.failure != nil {
			break
		}
		f := chk.Check(ctx, j, c)
		if ctx.Err() != nil && f.Fail == nil {
			f.Fail = fail("interrupted while judging", ctx.Err().Error())
		}
		c.tampered = append(c.tampered, f.Tampered...)
		if f.Note != "" {
			c.notes = append(c.notes, f.Note)
		}
		if f.Skipped {
			continue
		}
		r := CheckResult{Check: chk.Name(), OK: f.Fail == nil}
		if f.Fail != nil {
			r.Detail = f.Fail.Summary
			c.failure = f.Fail
		}
		c.checks = append(c.checks, r)
	}
}

// finish makes the verdict, withdraws a failed claim from the queue and
// appends the judgement to the item's log.
func (j *Judge) finish(c *Case) Verdict {
	v := Verdict{Claimed: c.claimed(), Gates: c.results, Tampered: c.tampered, Evidence: c.evidence}
	for _, ch := range c.changes {
		v.Files = append(v.Files, ch.Path)
	}
	switch {
	case c.failure != nil:
		f := *c.failure
		v.Passed, v.Summary, v.Failure, v.Conflict, v.Unproven = false, f.Summary, f.Failure, f.Conflict, f.Unproven
		if !f.Claimed && f.Summary != "" && !c.claimed() {
			v.Claimed = false
		}
		if len(f.Gates) > 0 && len(v.Gates) == 0 {
			v.Gates = f.Gates
		}
		if red := c.stillRedNote(); red != "" && v.Failure != "" {
			v.Failure += "\n\n" + red
		}
		if c.ticket != nil {
			c.Lander.Withdraw(c.ticket)
			c.ticket = nil
		}
		c.snap.Remove()
		c.snap = nil
	default:
		v.Passed = true
		v.Tree, v.Ticket, v.Snapshot = c.tree, c.ticket, c.snap
		for _, t := range c.stillRed {
			v.StillRed = append(v.StillRed, t.String())
		}
		v.Summary = c.summary()
		v.Message = c.message(v.Summary)
	}
	if c.failure != nil && c.claimed() && c.snap == nil && c.tree == "" && len(c.results) == 0 && v.Summary == "" {
		v.Summary = "not verified"
	}
	v.Judgement = j.record(c, v)
	return v
}

// summary is a passing verdict's line: the gates, the tests still red
// since the base, the evidence.
func (c *Case) summary() string {
	var parts []string
	if c.Claim.Judged != nil && c.Claim.Judged.Summary != "" {
		parts = append(parts, c.Claim.Judged.Summary)
	}
	if s := gatesSummary(c.results, c.base); s != "" {
		parts = append(parts, s)
	}
	if c.met != "" {
		parts = append(parts, "exit condition met: "+c.met)
	}
	var ev []string
	for _, e := range c.evidence {
		if e.Kind != EvidenceCondition { // said above
			ev = append(ev, e.String())
		}
	}
	if len(ev) > 0 {
		parts = append(parts, "evidence: "+list(ev, 3))
	}
	if len(c.stillRed) > 0 {
		var red []string
		for _, t := range c.stillRed {
			red = append(red, t.String())
		}
		parts = append(parts, "still red since the base, not this "+c.Kind+"'s: "+list(red, 5))
	}
	for _, n := range c.notes {
		if strings.HasPrefix(n, "no test inventory") || strings.HasPrefix(n, "not verified") {
			parts = append(parts, n)
		}
	}
	if len(parts) == 0 {
		return "passed"
	}
	return strings.Join(parts, "; ")
}

// stillRedNote tells the next agent which failures were there before it.
func (c *Case) stillRedNote() string {
	if len(c.stillRed) == 0 {
		return ""
	}
	var red []string
	for _, t := range c.stillRed {
		red = append(red, t.String())
	}
	return "Still failing since the base (not blamed on you, never called passed): " + list(red, 20) + "."
}

// message is the commit message of a passing claim: subject, bullets,
// the "Verified by ralph" line, trailers.
func (c *Case) message(summary string) string {
	var b strings.Builder
	b.WriteString(oneLine(c.Claim.Subject))
	b.WriteString("\n\n")
	for _, l := range c.Claim.Body {
		fmt.Fprintf(&b, "- %s\n", oneLine(l))
	}
	fmt.Fprintf(&b, "- Verified by ralph: %s\n", oneLine(summary))
	b.WriteString("\n")
	for _, t := range c.Claim.Trailers {
		b.WriteString(oneLine(t) + "\n")
	}
	if c.judgedBy != "" {
		b.WriteString(judgedByTrailer + ": " + oneLine(c.judgedBy) + "\n")
	}
	return b.String()
}

// oneLine folds line breaks and control characters into spaces, so data
// (titles, learnings) never adds a line, or a trailer, to a message.
func oneLine(s string) string {
	s = strings.TrimSpace(strings.ToValidUTF8(s, "\uFFFD"))
	isControl := func(r rune) bool { return r < 0x20 || r == 0x7f || r == 0x85 || r == 0x2028 || r == 0x2029 }
	if strings.IndexFunc(s, isControl) < 0 {
		return s
	}
	return strings.Join(strings.Fields(strings.Map(func(r rune) rune {
		if isControl(r) {
			return ' '
		}
		return r
	}, s)), " ")
}

// record appends the judgement to the item's log (a failure to write is
// said in the transcript: the verdict stands).
func (j *Judge) record(c *Case, v Verdict) *Judgement {
	jd := Judgement{Item: c.Item, Iteration: c.Iteration, Attempt: c.Attempt, Time: time.Now().UTC(), Tree: v.Tree, Base: c.Base,
		Claimed: v.Claimed, Passed: v.Passed, Summary: v.Summary, Checks: c.checks, Evidence: c.evidence, StillRed: c.stillRed, Lost: c.lost, Contract: c.contract, Worker: c.judgedBy}
	if c.ticket != nil {
		if p := c.ticket.Plan(); p.On == nil {
			jd.Parent = p.Base
		}
	}
	for _, r := range c.results {
		g := GateRun{Name: r.Name, Command: r.Command, Passed: r.Passed, ExitCode: r.ExitCode, DurationMS: r.Duration.Milliseconds(), RedAtBase: failedAt(c.base, r)}
		if r.Tests != nil {
			g.Tests, g.Inventory = r.Tests.String(), r.Tests.PerTest
		}
		jd.Gates = append(jd.Gates, g)
	}
	for _, ch := range c.changes {
		jd.Files = append(jd.Files, FileStat{Path: ch.Path, Added: max(ch.Added, 0), Deleted: max(ch.Deleted, 0), Binary: ch.Added < 0})
	}
	if j.StateDir != "" {
		if err := Append(j.StateDir, jd); err != nil {
			fmt.Fprintf(c.log(), "ralph: could not record the judgement: %v\n", err)
		}
	}
	return &jd
}

// Landed records that v's tree landed as commit sha: the run-wide gates'
// results on it are the baseline of the items cut from it, and the
// item's judgement log says where it landed.
func (j *Judge) Landed(item string, v Verdict, sha string) {
	j.Baseline.Advance(sha, v.Gates)
	if j.StateDir == "" {
		return
	}
	_ = Append(j.StateDir, Judgement{Item: item, Time: time.Now().UTC(), Tree: v.Tree, Landed: sha, Passed: true, Claimed: true, Summary: "landed"})
}

// Lander is the owner of branch in this repository (land.New). A branch
// found rewritten — it no longer holds known, the newest commit that
// landed there — is put back, and report says so with what it dropped.
func (j *Judge) Lander(ctx context.Context, branch, known string, report func(string)) (*land.Lander, error) {
	if report == nil {
		return land.New(ctx, j.Repo, branch, known, nil)
	}
	return land.New(ctx, j.Repo, branch, known, func(found, tip, kept string) {
		ctx := context.WithoutCancel(ctx)
		dropped, _ := j.Repo.Log(ctx, found+".."+tip, "%h %s")
		what := strings.Join(dropped, "; ")
		if what == "" {
			what = "commit " + short(tip)
		}
		msg := fmt.Sprintf("%s was rewritten, dropping %s; restored to %s, the other version kept as %s", branch, what, short(tip), kept)
		// The main tree on that branch goes back with it: what it held is
		// kept, and nothing that landed is missing from the next work.
		if head, _ := j.Repo.Run(ctx, "symbolic-ref", "-q", "HEAD"); head == "refs/heads/"+branch {
			c := &Case{Item: "branch", RunID: "rewritten", Dir: j.Repo.Dir}
			tree := j.keepTree(ctx, c, "refs/heads/"+branch, found)
			if err := j.Repo.ResetHard(ctx, tip); err == nil {
				msg += "; the main tree is back at " + short(tip) + ", what it held kept as " + tree
			}
		}
		report(msg)
	})
}

// errStop is a step that cannot go on (a git failure).
var errStop = errors.New("the judge could not go on")

// gatesSummary renders the gates' results: "test passed (test: 3 passed,
// 0 failed, 0 skipped)", a gate red at the base marked as such.
func gatesSummary(results, base []gate.Result) string {
	if len(results) == 0 {
		return ""
	}
	var parts []string
	for _, r := range results {
		s := r.Name + " passed"
		switch {
		case !r.Passed && failedAt(base, r):
			s = r.Name + " red at the base and still red"
		case !r.Passed:
			s = r.Name + " FAILED"
		}
		if r.Tests != nil {
			s += " (" + r.Tests.String() + ")"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

// failedAt reports whether gate r failed in results (the base's).
func failedAt(results []gate.Result, r gate.Result) bool {
	for _, b := range results {
		if b.Name == r.Name && b.Command == r.Command {
			return !b.Passed
		}
	}
	return false
}
