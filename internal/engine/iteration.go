package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ralph-loop/ralph/internal/agent"
	"github.com/ralph-loop/ralph/internal/gate"
	"github.com/ralph-loop/ralph/internal/judge"
	"github.com/ralph-loop/ralph/internal/proc"
	"github.com/ralph-loop/ralph/internal/roles"
	"github.com/ralph-loop/ralph/internal/store"
)

// Iteration is one iteration under way: its item, the tree it runs in,
// its record in state and what the agent did. The steps below fill it in
// order; deciders read it (decider.go).
type Iteration struct {
	Item      *Item
	Workspace Workspace
	Current   *Current
	Attempt   *Attempt
	// Files are the paths the iteration changed, listed by the verify step
	// (nil when a claim passed in a tree of the item's own: its commit
	// lists them).
	Files []string
	// RoleVerdict is what the iteration's role said (REVIEW: approve or
	// changes); Review: the iteration is the review its item was held for.
	RoleVerdict roles.Decision
	Review      bool

	// What the judge needs across the iteration: the item's contract and
	// the refs when its agent started (beginJudging), the case it judged
	// (a stale landing is judged again from it), and whether a resolver
	// already ran.
	contract *judge.Contract
	refs     map[string]string
	judged   *judge.Case
	resolved bool

	e *Engine
	s iterSetup
}

// iterate runs one iteration on it, which the scheduler selected, step by
// step: setup → prepare → prompt → agent → signals → verify → decide →
// persist. Every process the iteration starts carries its tag; whatever
// still runs when it ends — a server the agent left behind, a setsid'd
// child, a gate's leftover — is killed and reaped.
func (e *Engine) iterate(ctx context.Context, it *Item, number int) error {
	ctx, tag := e.tagged(ctx, number)
	defer e.killLeftovers(it.ID, number, tag)
	x, err := e.begin(ctx, it, number)
	if err != nil {
		return err
	}
	defer x.Attempt.Log.Close()
	if err := e.runAgent(ctx, x); err != nil || x.Attempt.Result.RateLimit != nil {
		e.restorePolicy(x)
		return err
	}
	if err := e.signals(x); err != nil {
		return err
	}
	return e.conclude(ctx, x)
}

// begin is the steps before the agent: setup, prepare, prompt. The Stop
// hook's driver begins an iteration the same way and hands its prompt to
// the agent's session.
func (e *Engine) begin(ctx context.Context, it *Item, number int) (*Iteration, error) {
	snap := e.box.snapshot()
	s, err := e.setup(it, snap, number)
	if err != nil {
		return nil, err
	}
	x, err := e.prepare(ctx, s, snap)
	if err != nil {
		return nil, err
	}
	e.beginJudging(ctx, x)
	x.s.Prompt += protectedSection(x.contract, it.Kind)
	return x, e.prompt(x)
}

// protectedSection tells the agent which files it may not change (the
// item's contract: the tests and their configuration at its base), and
// where its own tests go. "" when there are none or a person allowed test
// changes.
func protectedSection(k *judge.Contract, kind string) string {
	if k == nil || k.AllowTestChanges || len(k.Protected) == 0 {
		return ""
	}
	const shown = 20
	names := k.Protected
	more := ""
	if len(names) > shown {
		more = fmt.Sprintf(" and %d more", len(names)-shown)
		names = names[:shown]
	}
	rule := "Put new tests in new files"
	if k.Declarations {
		rule = "Put new tests in new files, or add new test functions to a Go test file (every declaration it has now must stay exactly as it is)"
	}
	return fmt.Sprintf("\n## Files you may not change\n\nThese files decide whether the %s is done, so they stay as they were when it started (a change to one fails the %s): %s%s. %s; make the code pass the tests, never the tests pass the code.\n",
		kind, kind, strings.Join(names, ", "), more, rule)
}

// readOnly are the absolute paths the agent's sandbox keeps read-only:
// the item's protected files, unless a person allowed test changes.
func (x *Iteration) readOnly() []string {
	k := x.contract
	if k == nil || k.AllowTestChanges {
		return nil
	}
	out := make([]string, 0, len(k.Protected))
	for _, p := range k.Protected {
		if k.Declarations && strings.HasSuffix(p, "_test.go") {
			continue // it may gain tests; the judge checks the old ones
		}
		out = append(out, filepath.Join(x.Workspace.Dir, filepath.FromSlash(p)))
	}
	return out
}

// conclude is the steps after the agent's signals: verify, decide,
// persist. Run, a resume after a crash while verifying and the Stop hook
// all conclude an iteration here.
func (e *Engine) conclude(ctx context.Context, x *Iteration) error {
	// The iteration's entry is in progress.md once it is decided: the
	// older entries may be due for the summariser.
	defer func() {
		if ctx.Err() == nil {
			e.compactProgress(ctx)
		}
	}()
	v, err := e.verify(ctx, x)
	if err != nil {
		return err
	}
	if v.Conflict != nil {
		if v, err = e.resolve(ctx, x, v); err != nil {
			return err
		}
	}
	d, err := e.decide(ctx, x, v)
	if err != nil {
		return err
	}
	return e.persist(ctx, x, v, d)
}

// prepare readies the item's tree (Source.Prepare) and records the
// iteration as under way, phase agent, before anything runs in it.
func (e *Engine) prepare(ctx context.Context, s iterSetup, snap *State) (*Iteration, error) {
	cfg := &e.cfg
	it, number := s.Item, s.Iteration
	ws, err := cfg.Source.Prepare(ctx, it, snap)
	if err != nil {
		return nil, err
	}
	// The item's base is taken once, before its first iteration; a retry
	// builds on the same base and needs no git call for it.
	var is ItemState
	if r := snap.Items[it.ID]; r != nil {
		is = *r
	}
	// The source knows where the item's work starts when it says (a
	// worktree's cut, the main tree's tip); else the item's first base.
	head := ws.Base
	if head == "" {
		head = is.BaseHead
	}
	if head == "" {
		head, _ = cfg.Git.HeadOf(ctx, ws.Dir)
	}
	cur := &Current{Item: it.ID, Iteration: number, Attempt: s.Attempt, Phase: PhaseAgent, BaseHead: head, StartedAt: cfg.Clock.Now().UTC(),
		Role: s.Role, RoleWhy: s.RoleWhy, Planning: s.Planning}
	if s.Planning {
		// A new plan replaces a rejected one, which is kept; HEAD now
		// tells that the planner committed nothing.
		if err := e.readyPlanFile(it, is.PlanRev); err != nil {
			return nil, err
		}
		cur.StartHead, _ = cfg.Git.HeadOf(ctx, ws.Dir)
	}
	if ws.Dir != cfg.Paths.Root {
		cur.Worktree = ws.Dir
	}
	x := &Iteration{Item: it, Workspace: ws, Current: cur, e: e, s: s}
	err = e.box.update(func(st *State) {
		st.Current = append(st.Current, cur)
		is := st.Item(it.ID)
		is.Status = ItemRunning
		is.Runs++
		if is.BaseHead == "" || ws.Base != "" {
			is.BaseHead = head
		}
		is.Iterations = append(is.Iterations, number)
		x.Review = is.Review != "" && is.Review == s.Role
		is.Role, is.Revise = s.Role, false
		if s.Role != "" {
			if st.RoleLast == nil {
				st.RoleLast = map[string]int{}
			}
			st.RoleLast[s.Role] = number
		}
	})
	return x, err
}

// prompt opens the iteration's transcript, writes the prompt where the
// agent reads it, and announces the iteration.
func (e *Engine) prompt(x *Iteration) error {
	s, it, cur := x.s, x.Item, x.Current
	tr, err := e.openTranscript(cur.Iteration, it.ID, s.Role)
	if err != nil {
		return err
	}
	if err := writeFile(e.promptFile(it.ID), s.Prompt); err != nil {
		tr.Close()
		return err
	}
	x.Attempt = &Attempt{Item: it, Dir: x.Workspace.Dir, Promise: e.cfg.Prompt.Promise, Log: tr, Prompt: s.Prompt, Role: s.Role}
	// A plain loop's iterations are its attempts: it says neither twice.
	attempt := fmt.Sprintf(" · attempt %d/%d", s.Attempt, s.MaxAttempts)
	if it.Kind == "loop" {
		attempt = ""
	}
	roleNote, msg := "", fmt.Sprintf("iteration %s · %s %s%s", IterationOf(cur.Iteration, s.MaxIterations), it.ID, it.Title, attempt)
	if s.Role != "" {
		roleNote = " · role " + s.Role
		msg += " · role " + s.Role + " (" + s.RoleWhy + ")"
	}
	fmt.Fprintf(tr, "# ralph iteration %d · %s%s%s · agent %s\n# started %s\n# dir %s\n\n## Prompt\n\n%s\n\n## Agent output\n\n",
		cur.Iteration, it.Label(), attempt, roleNote, s.Agent.Name, cur.StartedAt.Format(time.RFC3339), x.Workspace.Dir, s.Prompt)
	data := map[string]any{"transcript": tr.Path, "retry": s.Data.RetryContext != "", "title": it.Title, "agent": s.Agent.Name}
	if s.Role != "" {
		data["role"], data["role_why"] = s.Role, s.RoleWhy
	}
	if gs := s.Data.Guidance; len(gs) > 0 {
		e.guidanceShown(gs, it.ID, cur.Iteration)
		var ids []string
		for _, g := range gs {
			ids = append(ids, g.ID)
		}
		data["guidance"] = ids
	}
	e.emit(Event{Type: "iteration_started", Iteration: cur.Iteration, Item: it.ID, Attempt: s.Attempt, Message: msg, Data: data})
	return nil
}

// runAgent runs the iteration's agent, once any rate limit has passed. A
// run that hit the limit undoes the iteration (rateLimited): the caller
// then stops, with Attempt.Result.RateLimit set.
func (e *Engine) runAgent(ctx context.Context, x *Iteration) error {
	it, cur, s := x.Item, x.Current, x.s
	if err := e.waitForRateLimit(ctx); err != nil {
		return err
	}
	req := e.request(s, x.Workspace.Dir, s.Prompt, s.Role, e.runID())
	req.Transcript = x.Attempt.Log
	req.ReadOnly = x.readOnly()
	req.Started = func(pid int) { _ = e.box.update(func(st *State) { cur.AgentPID = pid }) }
	res, err := s.Agent.Agent.Run(ctx, req)
	if ctx.Err() != nil {
		fmt.Fprintf(x.Attempt.Log, "\n[ralph] interrupted\n")
		return ctx.Err()
	}
	if err != nil {
		return fmt.Errorf("agent %s: %w", s.Agent.Name, err)
	}
	res = e.masked(res)
	e.maskRepoProgress(x.Workspace.Dir, it.ID)
	x.Attempt.Result = res
	data := map[string]any{"exit_code": res.ExitCode, "duration_ms": res.Duration.Milliseconds(), "usage": res.Usage, "session_id": res.SessionID}
	if res.Worker != "" {
		data["worker"], data["worker_host"] = res.Worker, res.WorkerHost
	}
	e.emit(Event{Type: "agent_finished", Iteration: cur.Iteration, Item: it.ID, Attempt: cur.Attempt, Message: agentSummary(res), Data: data})
	if res.RateLimit != nil {
		_ = e.box.update(func(st *State) { st.addUsage(it.ID, res.Usage) })
		return e.rateLimited(it, cur, res.RateLimit)
	}
	e.resetBackoff()
	return nil
}

// signals reads what the agent's final message claims and moves the
// iteration to its verify phase, keeping the final message for a resume.
func (e *Engine) signals(x *Iteration) error {
	e.readSignals(x.Attempt)
	e.readVerdict(x)
	res := x.Attempt.Result
	e.acknowledgeGuidance(x.Item.ID, x.Current.Iteration, res.FinalText, x.Attempt.Prompt)
	return e.box.update(func(st *State) {
		st.addUsage(x.Item.ID, res.Usage)
		if cur := st.current(x.Item.ID); cur != nil {
			cur.Phase = PhaseVerify
			cur.Final = gate.Trim(res.FinalText, 16<<10)
		}
	})
}

// readSignals reads the completion promise and the learnings.
func (e *Engine) readSignals(att *Attempt) {
	att.Claimed = DetectPromise(att.Result.FinalText, e.cfg.Prompt.Promise, att.Prompt)
	att.Learnings = extractLearnings(att.Result.FinalText)
	for _, l := range extractLearnings(att.Result.Learnings) {
		if !slices.Contains(att.Learnings, l) {
			att.Learnings = append(att.Learnings, l)
		}
	}
}

// readVerdict reads a role's verdict from its final message. An approval
// is the iteration's claim that the item is done (the gates still run); a
// request for changes — or no verdict from a review the item waits for —
// is a rejection, whatever else the message or the files claim.
func (e *Engine) readVerdict(x *Iteration) {
	att := x.Attempt
	if att.Role == "" || x.Item.Role != "" {
		return
	}
	rv := roles.ParseVerdict(att.Result.FinalText)
	x.RoleVerdict = rv.Decision
	switch {
	case rv.Decision == roles.Approve:
		att.Claimed = true
	case rv.Decision == roles.Changes:
		att.Claimed = false
		att.Rejected = rv.Findings
		if att.Rejected == "" {
			att.Rejected = "(the " + att.Role + " gave no findings)"
		}
	case x.Review:
		att.Claimed = false
		att.Rejected = "The " + att.Role + " ended without a verdict: the last line of its final message must be REVIEW: approve or REVIEW: changes. The work is not approved."
	}
}

// verify has the judge judge the iteration (the source's claim, every
// check, the gates on exactly the tree that would land) and lists the
// files it changed. A planning iteration is not judged: its decider
// judges the plan.
func (e *Engine) verify(ctx context.Context, x *Iteration) (Verdict, error) {
	cfg := &e.cfg
	cur, att := x.Current, x.Attempt
	var v Verdict
	if !cur.Planning {
		v = e.judgeAttempt(ctx, x, att)
		if ctx.Err() != nil {
			e.withdraw(x, v)
			return v, ctx.Err()
		}
		e.box.mutate(func(st *State) { cur.LastGate = v.Summary }) // persisted with the next write
		if x.RoleVerdict != roles.None {
			e.appendReview(x)
		}
		e.reportVerdict(x, v)
	} else if cfg.Policy != nil {
		// A planner changes no code, but what it changed of the run's
		// policy is put back all the same.
		for _, msg := range cfg.Policy.Restore(att.Dir) {
			e.emit(Event{Type: "tamper_detected", Iteration: cur.Iteration, Item: x.Item.ID, Message: fmt.Sprintf("%s: %s", x.Item.ID, msg)})
		}
	}
	switch {
	case v.Files != nil:
		x.Files, att.Files = v.Files, v.Files
	default:
		x.Files, _ = cfg.Git.Changed(ctx, att.Dir, ".ralph/")
	}
	return v, nil
}

// reportVerdict emits what a verdict found: tampering, each gate.
func (e *Engine) reportVerdict(x *Iteration, v Verdict) {
	it, cur := x.Item, x.Current
	for _, t := range v.Tampered {
		e.emit(Event{Type: "tamper_detected", Iteration: cur.Iteration, Item: it.ID, Message: t})
	}
	for _, g := range v.Gates {
		verdict := "passed"
		if !g.Passed {
			verdict = "FAILED"
		}
		e.emit(Event{Type: "gate_result", Iteration: cur.Iteration, Item: it.ID,
			Message: fmt.Sprintf("gate %s %s (%s)", g.Name, verdict, g.Duration.Round(time.Millisecond)),
			Data:    map[string]any{"gate": g.Name, "passed": g.Passed, "exit_code": g.ExitCode, "duration_ms": g.Duration.Milliseconds()}})
	}
}

// withdraw takes a verdict's work out of its lander's queue (it will not
// land now: it failed, or a decider holds it).
func (e *Engine) withdraw(x *Iteration, v Verdict) {
	if v.Ticket != nil && x.judged != nil && x.judged.Lander != nil {
		x.judged.Lander.Withdraw(v.Ticket)
	}
	if v.Snapshot != nil {
		v.Snapshot.Remove()
	}
}

// decide asks the deciders in order (internal/decide: plan approval, a
// review to hold for, the council, test-fix re-runs); the first word that
// is not Next is the decision. With none, the verdict decides.
func (e *Engine) decide(ctx context.Context, x *Iteration, v Verdict) (Decision, error) {
	for _, d := range e.cfg.Deciders {
		dec, err := d.Decide(ctx, x, v)
		if err != nil || dec.Action != next {
			// A decider's words may name what the agent did (the files a
			// planner changed): masked like the verdict's.
			dec.Verdict = e.maskVerdict(dec.Verdict)
			dec.Findings, dec.Status, dec.Progress = e.mask.String(dec.Findings), e.mask.String(dec.Status), e.mask.String(dec.Progress)
			dec.Result, dec.Log = e.mask.String(dec.Result), e.mask.String(dec.Log)
			return dec, err
		}
	}
	return Decision{}, nil
}

// persist records the decision: a verdict that passed with no word
// against it lands and the item is marked passed; a held item waits;
// anything else did not pass.
func (e *Engine) persist(ctx context.Context, x *Iteration, v Verdict, d Decision) error {
	switch d.Action {
	case Hold:
		e.withdraw(x, v)
		e.hold(ctx, x, v, d)
		return nil
	case Fail:
		e.withdraw(x, v)
		v = d.Verdict
		if d.Findings != "" {
			x.Attempt.Rejected = d.Findings
		}
	case next:
		if v.Passed {
			return e.commit(ctx, x, v)
		}
	default:
		e.withdraw(x, v)
	}
	return e.notPassed(ctx, x, v, d)
}

// hold keeps the item pending, no attempt spent, until what the decision
// waits for comes (a role's approval: its next iteration is that role's,
// in the same tree; a person's word on its plan).
func (e *Engine) hold(ctx context.Context, x *Iteration, v Verdict, d Decision) {
	it, cur := x.Item, x.Current
	facts := e.measure(ctx, x, v, x.Files)
	_ = e.box.update(func(st *State) {
		s := st.Item(it.ID)
		facts.record(s)
		s.Status = ItemPending
		s.Revise = false
		s.Fix, s.Fixes = "", 0
		s.LastFailed, s.Failures = false, 0
		s.LastResult, s.LastFailure = d.Result, ""
		d.record(s)
		st.dropCurrent(it.ID)
	})
	if d.Progress != "" {
		v = Verdict{Summary: d.Progress}
	}
	e.appendProgress(it, cur, d.Status, v, x.Attempt.Learnings, x.Files, "")
	e.announce(x, d)
}

// notPassed records an iteration that did not pass. A claim that failed
// (gates, a review's rejection, a broken agent run, tampering) or an
// iteration that moved nothing spends an attempt; one that did not claim
// done but moved the item on (a commit, changed files) is work in
// progress and spends none, nor does a re-run a decider asked for.
// Either way the tree is kept for the next iteration.
func (e *Engine) notPassed(ctx context.Context, x *Iteration, v Verdict, d Decision) error {
	it, cur, att := x.Item, x.Current, x.Attempt
	if told, ok := e.cfg.Source.(notPassedTold); ok && !x.Current.Planning {
		told.NotPassed(ctx, att, v)
	}
	e.keepWork(ctx, x, v)
	facts := e.measure(ctx, x, v, x.Files)
	var inProgress bool
	if d.Action == next {
		e.box.read(func(st *State) {
			is := st.Items[it.ID]
			// A plain loop's iteration without the promise is the loop
			// going on, not a failure: it spends no attempt and does not
			// count towards the breaker (a failed claim does).
			inProgress = !v.Claimed && att.Rejected == "" && !att.Result.Failed() && len(v.Tampered) == 0 &&
				(it.Kind == "loop" || (it.Kind == "story" || it.Kind == "task") && is != nil && progressed(is, facts))
		})
	}
	sig := failureSignature(v)
	limit, itemCap := e.maxAttempts(it), e.maxItemIterations()
	blocked := false
	_ = e.box.update(func(st *State) {
		s := st.Item(it.ID)
		facts.record(s)
		s.LastResult = v.Summary
		s.LastFailure = v.Failure
		s.Review, s.ReviewWhy = "", ""
		s.Revise = att.Rejected != ""
		st.dropCurrent(it.ID)
		switch {
		case d.Action == Rerun:
			s.LastFailed = true
			s.Failures++
			s.LastResult = d.Result
			d.record(s)
		case inProgress:
			s.InProgress++
			s.LastFailed, s.Failures = false, 0
			s.LastResult = "work in progress: " + v.Summary
			s.LastFailure = ""
		default:
			s.Attempts++
			s.Fix, s.Fixes = "", 0
			s.LastFailed = true
			s.Failures++
			if st.Breaker.LastSignature == sig {
				st.Breaker.SameCount++
			} else {
				st.Breaker.LastSignature, st.Breaker.SameCount = sig, 1
			}
			st.Breaker.NoProgress++
		}
		switch {
		case s.Attempts >= limit:
			blocked = true
			s.Status = ItemBlocked
			s.Reason = fmt.Sprintf("failed %s; last: %s", Plural(s.Attempts, "attempt"), v.Summary)
		case s.Runs >= itemCap && it.Kind != "loop": // a plain loop's one item has the run's iterations
			blocked = true
			s.Status = ItemBlocked
			s.Reason = fmt.Sprintf("not done after %s (--max-item-iterations %d); last: %s", Plural(s.Runs, "iteration"), itemCap, v.Summary)
		default:
			s.Status = ItemPending
		}
	})
	switch {
	case d.Action == Rerun:
		e.appendProgress(it, cur, d.Status, v, att.Learnings, x.Files, "")
		e.announce(x, d)
	case inProgress:
		e.appendProgress(it, cur, "in progress", v, att.Learnings, x.Files, "")
		fmt.Fprintf(att.Log, "\n[ralph] %s in progress: %s (no attempt spent)\n", it.ID, v.Summary)
		e.emit(Event{Type: "item_progress", Iteration: cur.Iteration, Item: it.ID, Attempt: cur.Attempt,
			Message: fmt.Sprintf("%s in progress, not claimed done yet (%s changed, %s); no attempt spent", it.ID, Plural(facts.files, "file"), Plural(max(facts.commits, 0), "commit"))})
	default:
		status := d.Status
		switch {
		case status != "":
		case att.Rejected != "":
			status = "changes requested by the " + att.Role
		default:
			status = "failed"
		}
		e.appendProgress(it, cur, status, v, att.Learnings, x.Files, "")
		fmt.Fprintf(att.Log, "\n[ralph] %s not passed: %s\n", it.ID, v.Summary)
		e.emit(Event{Type: "item_failed", Iteration: cur.Iteration, Item: it.ID, Attempt: cur.Attempt, Message: fmt.Sprintf("%s attempt %d/%d failed: %s", it.ID, cur.Attempt, limit, v.Summary)})
	}
	if blocked {
		var reason string
		e.box.read(func(st *State) { reason = st.Items[it.ID].Reason })
		if err := e.cfg.Source.Block(ctx, it, e.box.snapshot(), reason); err != nil {
			return err
		}
		e.emit(Event{Type: "item_blocked", Iteration: cur.Iteration, Item: it.ID, Message: fmt.Sprintf("%s blocked: %s", it.ID, reason)})
	}
	return nil
}

// keepWork lands what an iteration that did not pass left, unverified,
// when its source keeps every iteration's work (the plain loop's memory:
// the next fresh agent finds it in git). Nothing is kept of an iteration
// that tampered.
func (e *Engine) keepWork(ctx context.Context, x *Iteration, v Verdict) {
	c := x.judged
	if c == nil || c.Claim.KeepWork == "" || len(v.Tampered) > 0 || ctx.Err() != nil {
		return
	}
	if _, err := e.cfg.Judge.RecordWork(ctx, c, c.Claim.KeepWork); err != nil {
		e.emit(Event{Type: "source_error", Item: x.Item.ID, Message: "recording the iteration's work: " + err.Error()})
	}
}

// record writes the decider's own fields of the item's record.
func (d Decision) record(is *ItemState) {
	if d.Record != nil {
		d.Record(is)
	}
}

// announce ends the transcript with the decision's line and emits its
// events.
func (e *Engine) announce(x *Iteration, d Decision) {
	if d.Log != "" {
		fmt.Fprintf(x.Attempt.Log, "\n[ralph] %s\n", d.Log)
	}
	for _, ev := range d.Events {
		e.emit(ev)
	}
}

func (e *Engine) markPassed(it *Item, iteration int, commit, summary string) {
	now := e.cfg.Clock.Now().UTC()
	_ = e.box.update(func(st *State) {
		s := st.Item(it.ID)
		s.Status = ItemPassed
		s.Commit = commit
		s.PassedAt = &now
		s.LastResult = summary
		s.LastFailure = ""
		s.Reason = ""
		s.BaseHead = ""
		s.Review, s.ReviewWhy, s.Revise = "", "", false
		s.Fix, s.Fixes = "", 0
		s.LastFailed, s.Failures = false, 0
		st.dropCurrent(it.ID)
		st.Breaker = Breaker{}
	})
	e.emit(Event{Type: "item_passed", Iteration: iteration, Item: it.ID, Message: fmt.Sprintf("%s passed (%s), commit %s", it.ID, summary, ShortSHA(commit)), Data: map[string]any{"commit": commit}})
	if it.Kind == "stage" {
		var next *Item
		if n, err := e.cfg.Source.Next(e.box.snapshot(), nil); err == nil {
			next = n
		}
		to := "(end of pipeline)"
		if next != nil {
			to = next.ID
		}
		e.emit(Event{Type: "stage_advanced", Iteration: iteration, Item: it.ID, Message: fmt.Sprintf("stage %s done; next: %s", it.ID, to), Data: map[string]any{"from": it.ID, "to": to}})
	}
}

// itemFacts is what the harness measures at the end of an iteration that
// did not pass, for the next trigger evaluation and the progress rule.
type itemFacts struct {
	files       int
	commits     int // since the item's base; -1 when not measured
	mark        string
	failedGates []string
}

// measure takes the facts of an iteration in dir. The commit count costs
// a git call: it is taken when a trigger reads branch_commits or the
// iteration claimed nothing (the progress rule and its report read it).
func (e *Engine) measure(ctx context.Context, x *Iteration, v Verdict, files []string) itemFacts {
	f := itemFacts{files: len(files), commits: -1, mark: treeMark(x.Attempt.Dir, files)}
	for _, g := range v.Gates {
		if !g.Passed {
			f.failedGates = append(f.failedGates, g.Name)
		}
	}
	base := ""
	e.box.read(func(st *State) {
		if is := st.Items[x.Item.ID]; is != nil {
			base = is.BaseHead
		}
	})
	if base != "" && (e.cfg.Roles.Uses("branch_commits") || !v.Claimed) {
		if n, err := e.cfg.Git.CommitsSince(ctx, x.Attempt.Dir, base); err == nil {
			f.commits = n
		}
	}
	return f
}

// treeMark fingerprints the changed files of a tree (names, sizes, mtimes)
// so that an iteration that leaves the same uncommitted changes as the one
// before is told from one that changed them again, without a git call.
func treeMark(dir string, files []string) string {
	if len(files) == 0 {
		return ""
	}
	h := sha256.New()
	for _, f := range files {
		fmt.Fprintf(h, "%s\x00", f)
		if fi, err := os.Lstat(filepath.Join(dir, f)); err == nil {
			fmt.Fprintf(h, "%d %d\x00", fi.Size(), fi.ModTime().UnixNano())
		}
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// progressed says whether an iteration that did not claim done moved the
// item on: a new commit, or changed files that differ from what the
// iteration before left.
func progressed(is *ItemState, f itemFacts) bool {
	if f.commits > is.Commits {
		return true
	}
	return f.files > 0 && f.mark != is.TreeMark
}

// record keeps the facts in the item's state.
func (f itemFacts) record(is *ItemState) {
	is.FilesChanged = f.files
	is.TreeMark = f.mark
	if f.commits >= 0 {
		is.Commits = f.commits
	}
	is.FailedGates = f.failedGates
}

// maxAttempts is the attempt cap of one item.
func (e *Engine) maxAttempts(it *Item) int {
	if it.MaxAttempts > 0 {
		return it.MaxAttempts
	}
	return e.cfg.Limits.MaxAttempts
}

// maxItemIterations bounds the iterations on one item.
func (e *Engine) maxItemIterations() int {
	if e.cfg.Limits.MaxItemIterations > 0 {
		return e.cfg.Limits.MaxItemIterations
	}
	return defaultMaxItemIterations
}

// defaultMaxItemIterations is --max-item-iterations' default.
const defaultMaxItemIterations = 10

// appendReview puts a role's verdict and findings into progress, under
// "Review Notes" as the reviewer role writes them.
func (e *Engine) appendReview(x *Iteration) {
	it, cur, att := x.Item, x.Current, x.Attempt
	var b strings.Builder
	fmt.Fprintf(&b, "\n## %s · %s %s · iteration %d · Review Notes (%s)\n\n- Verdict: %s\n", e.cfg.Clock.Now().UTC().Format(time.RFC3339), it.Kind, it.ID, cur.Iteration, att.Role, x.RoleVerdict)
	if f := strings.TrimSpace(roles.ParseVerdict(att.Result.FinalText).Findings); f != "" {
		b.WriteString("- Findings:\n")
		for _, l := range strings.Split(gate.Trim(f, 4<<10), "\n") {
			fmt.Fprintf(&b, "  %s\n", l)
		}
	}
	e.logProgress([]byte(strings.TrimRight(b.String(), "\n")))
	e.emit(Event{Type: "review_verdict", Iteration: cur.Iteration, Item: it.ID, Message: fmt.Sprintf("%s: the %s says %s", it.ID, att.Role, x.RoleVerdict),
		Data: map[string]any{"role": att.Role, "verdict": string(x.RoleVerdict)}})
}

func (e *Engine) appendProgress(it *Item, cur *Current, status string, v Verdict, learnings, files []string, commit string) {
	var b strings.Builder
	fmt.Fprintf(&b, "\n## %s · %s %s · iteration %d · %s\n\n", e.cfg.Clock.Now().UTC().Format(time.RFC3339), it.Kind, it.ID, cur.Iteration, status)
	fmt.Fprintf(&b, "- Title: %s\n- Attempt: %d\n- Result: %s\n", it.Title, cur.Attempt, v.Summary)
	commitAndFiles(&b, commit, "Files changed", files)
	if len(learnings) > 0 {
		b.WriteString("- Learnings:\n")
		for _, l := range learnings {
			fmt.Fprintf(&b, "  - %s\n", l)
		}
	}
	e.logProgress([]byte(strings.TrimRight(b.String(), "\n")))
}

// appendSummary adds the debrief of an item that passed to the run
// folder's SUMMARY.md: what changed (the agent's own last words, else the
// commit's subject), the files, the learnings, the iterations and the cost.
func (e *Engine) appendSummary(it *Item, att *Attempt, files []string, commit string) {
	p := e.cfg.Paths.Summary
	if p == "" || it.Kind != e.info().ItemKind {
		return // a run folder's reviews are in review.md and steering.md
	}
	var is ItemState
	e.box.read(func(st *State) {
		if s := st.Items[it.ID]; s != nil {
			is = *s
		}
	})
	var b strings.Builder
	if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
		b.WriteString("# Summary\n\nOne debrief per story that passed, written by ralph.\n")
	}
	fmt.Fprintf(&b, "\n## %s · %s\n\n", it.ID, it.Title)
	what := firstWords(att.Result.FinalText, e.cfg.Prompt.Promise)
	if what == "" {
		what = "(the agent said nothing)"
	}
	fmt.Fprintf(&b, "- What changed: %s\n", what)
	commitAndFiles(&b, commit, "Files", files)
	if len(att.Learnings) > 0 {
		fmt.Fprintf(&b, "- Learnings: %s\n", strings.Join(att.Learnings, "; "))
	}
	fmt.Fprintf(&b, "- Iterations: %d (%s)\n", len(is.Iterations), Plural(is.Attempts, "failed attempt"))
	switch u := is.Usage; {
	case u == nil:
		b.WriteString("- Cost: not reported by the agent\n")
	case u.CostUSD > 0:
		fmt.Fprintf(&b, "- Cost: $%.4f (%d input, %d output tokens)\n", u.CostUSD, u.InputTokens, u.OutputTokens)
	default:
		fmt.Fprintf(&b, "- Cost: %d input, %d output tokens\n", u.InputTokens, u.OutputTokens)
	}
	_ = store.AppendLog(p, []byte(e.mask.String(strings.TrimRight(b.String(), "\n"))))
}

// commitAndFiles writes the "- Commit:" and file-list lines of a progress
// or summary entry (at most 20 files named).
func commitAndFiles(b *strings.Builder, commit, label string, files []string) {
	if commit != "" {
		fmt.Fprintf(b, "- Commit: %s\n", ShortSHA(commit))
	}
	if len(files) > 20 {
		files = append(files[:20:20], fmt.Sprintf("… %d more", len(files)-20))
	}
	if len(files) > 0 {
		fmt.Fprintf(b, "- %s: %s\n", label, strings.Join(files, ", "))
	}
}

// firstWords is the first line of an agent's final message that says
// something other than the completion promise, at most 300 bytes.
func firstWords(text, promise string) string {
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(strings.ReplaceAll(l, "<promise>"+promise+"</promise>", ""))
		if l != "" {
			return oneLine(l, 300)
		}
	}
	return ""
}

// reattach rebuilds an iteration begun earlier around its recorded Current
// — by a process that crashed while verifying it, or in the agent's own
// session (the Stop hook) — so that it can be concluded without running
// the agent. final is the agent's last message.
func (e *Engine) reattach(ctx context.Context, it *Item, cur *Current, final string) (*Iteration, error) {
	cfg := &e.cfg
	snap := e.box.snapshot()
	ws, err := cfg.Source.Prepare(ctx, it, snap)
	if err != nil {
		return nil, err
	}
	tr, err := e.openTranscript(cur.Iteration, it.ID, cur.Role)
	if err != nil {
		return nil, err
	}
	prompt, _ := os.ReadFile(e.promptFile(it.ID)) // no other iteration of the item began since
	att := &Attempt{Item: it, Dir: ws.Dir, Promise: cfg.Prompt.Promise, Log: tr, Prompt: string(prompt), Role: cur.Role}
	att.Result.FinalText = e.mask.String(final)
	x := &Iteration{Item: it, Workspace: ws, Current: cur, Attempt: att, e: e}
	if is := snap.Items[it.ID]; is != nil {
		x.Review = cur.Role != "" && is.Review == cur.Role
	}
	return x, nil
}

// reverify concludes an iteration a crash interrupted while verifying.
func (e *Engine) reverify(ctx context.Context, it *Item, cur *Current) error {
	ctx, tag := e.tagged(ctx, cur.Iteration)
	defer e.killLeftovers(it.ID, cur.Iteration, tag)
	x, err := e.reattach(ctx, it, cur, cur.Final)
	if err != nil {
		return err
	}
	defer x.Attempt.Log.Close()
	fmt.Fprintf(x.Attempt.Log, "\n[ralph] resumed after a crash: verifying again without running the agent\n")
	e.readSignals(x.Attempt)
	e.acknowledgeGuidance(it.ID, cur.Iteration, x.Attempt.Result.FinalText, x.Attempt.Prompt)
	e.readVerdict(x)
	return e.conclude(ctx, x)
}

// tagged marks ctx so that every process started under it carries the
// run's id and the iteration's tag (proc.WithTag).
func (e *Engine) tagged(ctx context.Context, number int) (context.Context, string) {
	runID := e.runID()
	tag := fmt.Sprintf("%s=%s/%d", proc.TagEnv, runID, number)
	return proc.WithTag(ctx, "RALPH_RUN_ID="+runID, tag), tag
}

// killLeftovers kills and reaps what an iteration left running.
func (e *Engine) killLeftovers(item string, number int, tag string) {
	if pids := proc.KillTagged(tag, false); len(pids) > 0 {
		e.emit(Event{Type: "leftovers_killed", Iteration: number, Item: item,
			Message: fmt.Sprintf("killed %d process(es) iteration %d left running: pids %v", len(pids), number, pids)})
	}
}

// masked masks what an agent returned before anything stores it (state,
// progress, commit messages, events).
func (e *Engine) masked(r agent.Result) agent.Result {
	r.FinalText = e.mask.String(r.FinalText)
	r.ErrorText = e.mask.String(r.ErrorText)
	r.Learnings = e.mask.String(r.Learnings)
	return r
}

// maskVerdict masks what a verdict carries into state, progress and the
// next prompt (gate output may print a secret).
func (e *Engine) maskVerdict(v Verdict) Verdict {
	v.Summary = e.mask.String(v.Summary)
	v.Failure = e.mask.String(v.Failure)
	v.Tampered = e.mask.Strings(v.Tampered)
	return v
}

func failureSignature(v Verdict) string {
	s := v.Summary + "\n" + v.Failure
	if len(s) > 2000 {
		s = s[:2000]
	}
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:8])
}

func agentSummary(r agent.Result) string {
	parts := []string{fmt.Sprintf("agent exited %d after %s", r.ExitCode, r.Duration.Round(time.Millisecond))}
	if r.TimedOut {
		parts[0] = fmt.Sprintf("agent timed out after %s and was killed", r.Duration.Round(time.Millisecond))
	}
	if r.Usage.InputTokens+r.Usage.OutputTokens > 0 {
		parts = append(parts, fmt.Sprintf("%d in / %d out tokens", r.Usage.InputTokens, r.Usage.OutputTokens))
	}
	if r.Usage.CostUSD > 0 {
		parts = append(parts, fmt.Sprintf("$%.4f", r.Usage.CostUSD))
	}
	if r.RateLimit != nil {
		parts = append(parts, "rate limited: "+r.RateLimit.Message)
	}
	return strings.Join(parts, ", ")
}

// Rejection is the verdict on an iteration whose role did not approve.
func Rejection(a *Attempt) Verdict { return judge.Rejection(a.Role, a.Rejected) }

// AgentFailure renders a failed agent run as a verdict.
func AgentFailure(r agent.Result) Verdict { return judge.AgentFailure(r) }

// Unlimited is the iteration limit of an open-ended run (watch mode): it
// is never shown as a number.
const Unlimited = 1 << 30

// IterationOf is "n/max", or just "n" when the run has no real limit.
func IterationOf(n, limit int) string {
	if limit <= 0 || limit >= Unlimited {
		return strconv.Itoa(n)
	}
	return fmt.Sprintf("%d/%d", n, limit)
}

// oneLine folds s into one line of at most n bytes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = s[:n] + " …"
	}
	return s
}
