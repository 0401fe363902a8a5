package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ralph-loop/ralph/internal/agent"
	"github.com/ralph-loop/ralph/internal/gate"
	"github.com/ralph-loop/ralph/internal/proc"
	"github.com/ralph-loop/ralph/internal/roles"
	"github.com/ralph-loop/ralph/internal/store"
)

// Transcript is one iteration's log file, streamed to disk with secrets
// masked (owner-only: it holds everything the agent printed).
type Transcript struct {
	Path string
	f    io.WriteCloser
	w    io.WriteCloser
}

// DefaultTranscriptMax caps a transcript unless the run says otherwise:
// beyond it the middle of the output is dropped (store.CappedFile).
const DefaultTranscriptMax = 50 << 20

// openTranscript opens an iteration's transcript: NNNN-<item>.log, or
// NNNN-<item>.<role>.log for an iteration with a role.
func (e *Engine) openTranscript(iteration int, item, role string) (*Transcript, error) {
	dir := e.cfg.Paths.Transcripts
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	name := fmt.Sprintf("%04d-%s", iteration, safeFileName(item))
	if role != "" {
		name += "." + safeFileName(role)
	}
	p := filepath.Join(dir, name+".log")
	f, err := store.OpenCapped(p, e.cfg.TranscriptMax)
	if err != nil {
		return nil, err
	}
	return &Transcript{Path: p, f: f, w: e.mask.Writer(f)}, nil
}

func (t *Transcript) Write(b []byte) (int, error) { return t.w.Write(b) }

// Close writes what the masking writer holds back, then closes the file.
func (t *Transcript) Close() error {
	err := t.w.Close()
	if cerr := t.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// masked masks what an agent returned before anything stores it (state,
// progress, commit messages, events).
func (e *Engine) masked(r agent.Result) agent.Result {
	r.FinalText = e.mask.String(r.FinalText)
	r.ErrorText = e.mask.String(r.ErrorText)
	r.Learnings = e.mask.String(r.Learnings)
	return r
}

// safeFileName makes an item id a file name. Ids that needed changing get
// a short hash of the id, so two ids (A/1 and A_1) never share a file.
func safeFileName(s string) string {
	var b strings.Builder
	changed := false
	for _, r := range s {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
			changed = true
		}
	}
	if changed || s == "" || s == "." || s == ".." {
		sum := sha256.Sum256([]byte(s))
		b.WriteString("-" + hex.EncodeToString(sum[:3]))
	}
	return b.String()
}

// iteration is one iteration under way: what it is, the tree it runs in,
// its record in state and what the agent did.
type iteration struct {
	it  *Item
	s   setup
	ws  Workspace
	cur *Current
	att *Attempt
	// review: the iteration is the review a held item waits for (its
	// role must approve); verdict is what its role decided.
	review  bool
	verdict roles.Decision
	// councilSaidNo: the item's council did not approve its passing claim.
	councilSaidNo bool
	// planning: the iteration writes the item's plan (--plan-approval).
	planning bool
}

// begin starts an iteration on it: the tree is prepared, the iteration is
// recorded as under way (phase agent), the prompt is written.
func (e *Engine) begin(ctx context.Context, it *Item, number int) (*iteration, error) {
	cfg := &e.cfg
	snap := e.box.snapshot()
	s, err := e.iterationSetup(it, snap, number)
	if err != nil {
		return nil, err
	}
	ws, err := cfg.Source.Prepare(ctx, it, snap)
	if err != nil {
		return nil, err
	}
	// The item's base is taken once, before its first iteration; a retry
	// builds on the same base and needs no git call for it.
	head := ""
	if is := snap.Items[it.ID]; is != nil {
		head = is.BaseHead
	}
	if head == "" {
		head = ws.Base
	}
	if head == "" {
		head, _ = cfg.Git.HeadOf(ctx, ws.Dir)
	}
	cur := &Current{Item: it.ID, Iteration: number, Attempt: s.Attempt, Phase: PhaseAgent, BaseHead: head, StartedAt: cfg.Clock.Now().UTC(),
		Role: s.Role, RoleWhy: s.RoleWhy, Planning: s.Planning}
	if s.Planning {
		// A new plan replaces a rejected one, which is kept.
		var rev int
		e.box.read(func(st *State) {
			if is := st.Items[it.ID]; is != nil {
				rev = is.PlanRev
			}
		})
		if err := e.readyPlanFile(it, rev); err != nil {
			return nil, err
		}
		cur.StartHead, _ = cfg.Git.HeadOf(ctx, ws.Dir)
	}
	review := false
	if ws.Dir != cfg.Paths.Root {
		cur.Worktree = ws.Dir
	}
	if err := e.box.update(func(st *State) {
		st.Current = append(st.Current, cur)
		is := st.Item(it.ID)
		is.Status = ItemRunning
		is.Runs++
		if is.BaseHead == "" {
			is.BaseHead = head
		}
		is.Iterations = append(is.Iterations, number)
		review = is.Review != "" && is.Review == s.Role
		is.Role, is.Revise = s.Role, false
		if s.Role != "" {
			if st.RoleLast == nil {
				st.RoleLast = map[string]int{}
			}
			st.RoleLast[s.Role] = number
		}
	}); err != nil {
		return nil, err
	}
	tr, err := e.openTranscript(number, it.ID, s.Role)
	if err != nil {
		return nil, err
	}
	if err := e.writePrompt(it.ID, s.Prompt); err != nil {
		tr.Close()
		return nil, err
	}
	roleNote, msg := "", fmt.Sprintf("iteration %s · %s %s · attempt %d/%d", IterationOf(number, s.MaxIterations), it.ID, it.Title, s.Attempt, s.MaxAttempts)
	if s.Role != "" {
		roleNote = " · role " + s.Role
		msg += " · role " + s.Role + " (" + s.RoleWhy + ")"
	}
	fmt.Fprintf(tr, "# ralph iteration %d · %s %s · attempt %d/%d%s · agent %s\n# started %s\n# dir %s\n\n## Prompt\n\n%s\n\n## Agent output\n\n",
		number, it.Kind, it.ID, s.Attempt, s.MaxAttempts, roleNote, s.Agent.Name, cur.StartedAt.Format(time.RFC3339), ws.Dir, s.Prompt)
	data := map[string]any{"transcript": tr.Path, "retry": s.Data.RetryContext != "", "title": it.Title, "agent": s.Agent.Name}
	if s.Role != "" {
		data["role"], data["role_why"] = s.Role, s.RoleWhy
	}
	e.emit(Event{Type: "iteration_started", Iteration: number, Item: it.ID, Attempt: s.Attempt, Message: msg, Data: data})
	att := &Attempt{Item: it, Dir: ws.Dir, Promise: cfg.Promise, Log: tr, Prompt: s.Prompt, Role: s.Role}
	return &iteration{it: it, s: s, ws: ws, cur: cur, att: att, review: review, planning: s.Planning}, nil
}

// iterate runs one whole iteration on it: begin, the agent, conclude.
// Every process the iteration starts carries its tag; whatever is still
// running when it ends — a server the agent left behind, a setsid'd
// child, a gate's leftover — is killed and reaped.
func (e *Engine) iterate(ctx context.Context, it *Item, number int) error {
	ctx, tag := e.tagged(ctx, number)
	defer e.killLeftovers(it.ID, number, tag)
	x, err := e.begin(ctx, it, number)
	if err != nil {
		return err
	}
	defer x.att.Log.Close()
	if err := e.waitForRateLimit(ctx); err != nil {
		return err
	}
	req := e.request(x.s, x.ws.Dir, x.s.Prompt, x.s.Role, e.runID())
	req.Transcript = x.att.Log
	req.Started = func(pid int) { _ = e.box.update(func(st *State) { x.cur.AgentPID = pid }) }
	res, err := x.s.Agent.Agent.Run(ctx, req)
	if ctx.Err() != nil {
		fmt.Fprintf(x.att.Log, "\n[ralph] interrupted\n")
		return ctx.Err()
	}
	if err != nil {
		return fmt.Errorf("agent %s: %w", x.s.Agent.Name, err)
	}
	res = e.masked(res)
	x.att.Result = res
	e.emit(Event{Type: "agent_finished", Iteration: number, Item: it.ID, Attempt: x.cur.Attempt,
		Message: agentSummary(res), Data: map[string]any{"exit_code": res.ExitCode, "duration_ms": res.Duration.Milliseconds(), "usage": res.Usage, "session_id": res.SessionID}})
	if res.RateLimit != nil {
		_ = e.box.update(func(st *State) { st.addUsage(it.ID, res.Usage) })
		return e.rateLimited(it, x.cur, res.RateLimit)
	}
	e.resetBackoff()
	if err := e.claimed(x); err != nil {
		return err
	}
	return e.conclude(ctx, x)
}

// tagged marks ctx so that every process started under it carries the
// run's id and the iteration's tag (proc.WithTag).
func (e *Engine) tagged(ctx context.Context, number int) (context.Context, string) {
	runID := e.runID()
	tag := fmt.Sprintf("%s=%s/%d", proc.TagEnv, runID, number)
	return proc.WithTag(ctx, "RALPH_RUN_ID="+runID, tag), tag
}

// maskVerdict masks what a verdict carries into state, progress and the
// next prompt (gate output may print a secret).
func (e *Engine) maskVerdict(v Verdict) Verdict {
	v.Summary = e.mask.String(v.Summary)
	v.Failure = e.mask.String(v.Failure)
	v.Tampered = e.mask.Strings(v.Tampered)
	return v
}

// killLeftovers kills and reaps what an iteration left running.
func (e *Engine) killLeftovers(item string, number int, tag string) {
	if pids := proc.KillTagged(tag, false); len(pids) > 0 {
		e.emit(Event{Type: "leftovers_killed", Iteration: number, Item: item,
			Message: fmt.Sprintf("killed %d process(es) iteration %d left running: pids %v", len(pids), number, pids)})
	}
}

// reattach rebuilds an iteration begun earlier around its recorded Current
// — by a process that crashed while verifying it, or in the agent's own
// session (the Stop hook) — so that it can be concluded without running
// the agent. final is the agent's last message.
func (e *Engine) reattach(ctx context.Context, it *Item, cur *Current, final string) (*iteration, error) {
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
	att := &Attempt{Item: it, Dir: ws.Dir, Promise: cfg.Promise, Log: tr, Prompt: string(prompt), Role: cur.Role}
	att.Result.FinalText = e.mask.String(final)
	review := false
	if is := snap.Items[it.ID]; is != nil {
		review = cur.Role != "" && is.Review == cur.Role
	}
	return &iteration{it: it, ws: ws, cur: cur, att: att, review: review, planning: cur.Planning}, nil
}

// reverify concludes an iteration a crash interrupted while verifying.
func (e *Engine) reverify(ctx context.Context, it *Item, cur *Current) error {
	ctx, tag := e.tagged(ctx, cur.Iteration)
	defer e.killLeftovers(it.ID, cur.Iteration, tag)
	x, err := e.reattach(ctx, it, cur, cur.Final)
	if err != nil {
		return err
	}
	defer x.att.Log.Close()
	fmt.Fprintf(x.att.Log, "\n[ralph] resumed after a crash: verifying again without running the agent\n")
	e.readSignals(x.att)
	e.readVerdict(x)
	return e.conclude(ctx, x)
}

// readSignals reads what the agent's final message claims.
func (e *Engine) readSignals(att *Attempt) {
	att.Claimed = DetectPromise(att.Result.FinalText, e.cfg.Promise, att.Prompt)
	att.Learnings = ExtractLearnings(att.Result.FinalText)
	for _, l := range ExtractLearnings(att.Result.Learnings) {
		if !slices.Contains(att.Learnings, l) {
			att.Learnings = append(att.Learnings, l)
		}
	}
}

// readVerdict reads a role's verdict from its final message. An approval
// is the iteration's claim that the item is done (the gates still run); a
// request for changes — or no verdict from a review the item waits for —
// is a rejection, whatever else the message or the files claim.
func (e *Engine) readVerdict(x *iteration) {
	att := x.att
	if att.Role == "" || x.it.Role != "" {
		return
	}
	rv := roles.ParseVerdict(att.Result.FinalText)
	x.verdict = rv.Decision
	switch {
	case rv.Decision == roles.Approve:
		att.Claimed = true
	case rv.Decision == roles.Changes:
		att.Claimed = false
		att.Rejected = rv.Findings
		if att.Rejected == "" {
			att.Rejected = "(the " + att.Role + " gave no findings)"
		}
	case x.review:
		att.Claimed = false
		att.Rejected = "The " + att.Role + " ended without a verdict: the last line of its final message must be REVIEW: approve or REVIEW: changes. The work is not approved."
	}
}

// claimed reads the signals of a finished agent run and moves the
// iteration to its verify phase, keeping the final message for a resume.
func (e *Engine) claimed(x *iteration) error {
	e.readSignals(x.att)
	e.readVerdict(x)
	res := x.att.Result
	return e.box.update(func(st *State) {
		st.addUsage(x.it.ID, res.Usage)
		if cur := st.current(x.it.ID); cur != nil {
			cur.Phase = PhaseVerify
			cur.Final = gate.Trim(res.FinalText, 16<<10)
		}
	})
}

// conclude verifies an iteration and decides: pass (accept through the
// merge queue) or fail (spend an attempt, maybe block).
func (e *Engine) conclude(ctx context.Context, x *iteration) error {
	cfg := &e.cfg
	src := cfg.Source
	it, cur, att := x.it, x.cur, x.att
	tr, dir := att.Log, att.Dir
	if x.planning {
		return e.concludePlan(ctx, x)
	}
	// The iteration's entry is in progress.md once it is decided: the
	// older entries may be due for the summariser.
	defer func() {
		if ctx.Err() == nil {
			e.compactProgress(ctx)
		}
	}()
	v := src.Verify(ctx, att, e.box.snapshot())
	if ctx.Err() != nil {
		return ctx.Err()
	}
	v = e.maskVerdict(v)
	e.box.mutate(func(st *State) { cur.LastGate = v.Summary }) // persisted with the next write
	if x.verdict != roles.None {
		e.appendReview(x)
	}
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
	// A passing item in a tree of its own gets its file list when its
	// work is committed there (no extra git call), and a source that
	// listed them while verifying says so; every other iteration asks git
	// now, before the commit makes the tree clean.
	var files []string
	switch {
	case att.Files != nil:
		files = att.Files
	case !v.Passed || !x.ws.Isolated():
		files, _ = cfg.Git.Changed(ctx, dir, ".ralph/")
	}

	if v.Passed {
		t, err := e.completionGate(x)
		if err != nil {
			return UsageError("%v", err)
		}
		if t != nil {
			e.holdForReview(ctx, x, v, files, t)
			return nil
		}
		rv, err := e.councilVote(ctx, x, v)
		if err != nil {
			return err
		}
		commit := ""
		if rv == nil {
			if commit, rv, err = e.accept(ctx, x, v); err != nil {
				return err
			}
		}
		if att.Files != nil {
			files = att.Files
		}
		if rv == nil {
			e.appendProgress(it, cur, "passed", v, att.Learnings, files, commit)
			e.markPassed(it, cur.Iteration, commit, v.Summary)
			e.appendSummary(it, att, files, commit)
			fmt.Fprintf(tr, "\n[ralph] %s passed: %s; commit %s\n", it.ID, v.Summary, short(commit))
			// Dependents may start now; the tree is tidied after that,
			// off their path (and off the agent slots).
			e.slots.poke()
			if x.ws.Tidy != nil {
				x.ws.Tidy(ctx, att)
			}
			return nil
		}
		v = *rv
	}
	return e.notPassed(ctx, x, v, files)
}

// notPassed records an iteration that did not pass. A claim that failed
// (gates, a review's rejection, a broken agent run, tampering) or an
// iteration that moved nothing spends an attempt; one that did not claim
// done but moved the item on (a commit, changed files) is work in
// progress and spends none.
// Either way the tree is kept for the next iteration.
func (e *Engine) notPassed(ctx context.Context, x *iteration, v Verdict, files []string) error {
	cfg := &e.cfg
	src := cfg.Source
	it, cur, att := x.it, x.cur, x.att
	tr := att.Log
	facts := e.measure(ctx, x, v, files)
	var inProgress bool
	e.box.read(func(st *State) {
		is := st.Items[it.ID]
		inProgress = !v.Claimed && att.Rejected == "" && !att.Result.Failed() && len(v.Tampered) == 0 &&
			(it.Kind == "story" || it.Kind == "task") && is != nil && progressed(is, facts)
	})
	sig := failureSignature(v)
	limit, itemCap := e.maxAttempts(it), e.maxItemIterations()
	blocked, fix := false, 0
	_ = e.box.update(func(st *State) {
		s := st.Item(it.ID)
		facts.record(s)
		s.LastResult = v.Summary
		s.LastFailure = v.Failure
		s.Review, s.ReviewWhy = "", ""
		s.Revise = att.Rejected != ""
		st.dropCurrent(it.ID)
		// --test-fix: a claim whose test gate failed gets the agent again,
		// with the failing output, before the attempt counts as failed.
		testFix := cfg.TestFix > 0 && v.Claimed && att.Rejected == "" && !att.Result.Failed() && len(v.Tampered) == 0 &&
			slices.Contains(facts.failedGates, "test") && s.Fixes < cfg.TestFix
		switch {
		case testFix:
			s.Fixes++
			s.Fix, fix = cfg.TestFixRole, s.Fixes
			s.LastFailed = true
			s.Failures++
			s.LastResult = fmt.Sprintf("test gate failed; test-fix re-run %d/%d follows: %s", s.Fixes, cfg.TestFix, v.Summary)
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
			s.Reason = fmt.Sprintf("failed %d attempts; last: %s", s.Attempts, v.Summary)
		case s.Runs >= itemCap:
			blocked = true
			s.Status = ItemBlocked
			s.Reason = fmt.Sprintf("not done after %d iterations (--max-item-iterations %d); last: %s", s.Runs, itemCap, v.Summary)
		default:
			s.Status = ItemPending
		}
	})
	switch {
	case fix > 0:
		e.appendProgress(it, cur, fmt.Sprintf("test failed; test-fix re-run %d/%d follows", fix, cfg.TestFix), v, att.Learnings, files, "")
		fmt.Fprintf(tr, "\n[ralph] %s: the test gate failed; test-fix re-run %d/%d follows (no attempt spent)\n", it.ID, fix, cfg.TestFix)
		e.emit(Event{Type: "test_fix", Iteration: cur.Iteration, Item: it.ID, Attempt: cur.Attempt,
			Message: fmt.Sprintf("%s: the test gate failed; re-running the agent as %s with the failing output (test-fix re-run %d/%d within attempt %d/%d)", it.ID, cfg.TestFixRole, fix, cfg.TestFix, cur.Attempt, limit),
			Data:    map[string]any{"role": cfg.TestFixRole, "rerun": fix, "max": cfg.TestFix}})
	case inProgress:
		e.appendProgress(it, cur, "in progress", v, att.Learnings, files, "")
		fmt.Fprintf(tr, "\n[ralph] %s in progress: %s (no attempt spent)\n", it.ID, v.Summary)
		e.emit(Event{Type: "item_progress", Iteration: cur.Iteration, Item: it.ID, Attempt: cur.Attempt,
			Message: fmt.Sprintf("%s in progress, not claimed done yet (%d files changed, %d commits); no attempt spent", it.ID, facts.files, max(facts.commits, 0))})
	default:
		status := "failed"
		switch {
		case x.councilSaidNo:
			status = "rejected by the council"
		case att.Rejected != "":
			status = "changes requested by the " + att.Role
		}
		e.appendProgress(it, cur, status, v, att.Learnings, files, "")
		fmt.Fprintf(tr, "\n[ralph] %s not passed: %s\n", it.ID, v.Summary)
		e.emit(Event{Type: "item_failed", Iteration: cur.Iteration, Item: it.ID, Attempt: cur.Attempt, Message: fmt.Sprintf("%s attempt %d/%d failed: %s", it.ID, cur.Attempt, limit, v.Summary)})
	}
	if blocked {
		var reason string
		e.box.read(func(st *State) { reason = st.Items[it.ID].Reason })
		if berr := src.Block(ctx, it, e.box.snapshot(), reason); berr != nil {
			return berr
		}
		e.emit(Event{Type: "item_blocked", Iteration: cur.Iteration, Item: it.ID, Message: fmt.Sprintf("%s blocked: %s", it.ID, reason)})
	}
	return nil
}

// holdForReview keeps an item whose claim passed the gates from passing
// until the role a completion trigger named approves it: the next
// iteration on the item is that role's, in the same tree.
func (e *Engine) holdForReview(ctx context.Context, x *iteration, v Verdict, files []string, t *roles.Trigger) {
	it, cur := x.it, x.cur
	if files == nil {
		files, _ = e.cfg.Git.Changed(ctx, x.att.Dir, ".ralph/")
	}
	facts := e.measure(ctx, x, v, files)
	why := e.triggerWhy(t)
	_ = e.box.update(func(st *State) {
		s := st.Item(it.ID)
		facts.record(s)
		s.Status = ItemPending
		s.Review, s.ReviewWhy, s.Revise = t.Role, why, false
		s.Fix, s.Fixes = "", 0
		s.LastFailed, s.Failures = false, 0
		s.LastResult = v.Summary + "; waiting for the " + t.Role + "'s approval"
		s.LastFailure = ""
		st.dropCurrent(it.ID)
	})
	v.Summary += "; the " + t.Role + " must approve"
	e.appendProgress(it, cur, "ready for review", v, x.att.Learnings, files, "")
	fmt.Fprintf(x.att.Log, "\n[ralph] %s claimed done and its gates passed; the %s must approve (%s)\n", it.ID, t.Role, why)
	e.emit(Event{Type: "review_requested", Iteration: cur.Iteration, Item: it.ID, Attempt: cur.Attempt,
		Message: fmt.Sprintf("%s claimed done and its gates passed; the %s must approve before it passes (%s)", it.ID, t.Role, why),
		Data:    map[string]any{"role": t.Role, "trigger": why}})
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
	e.emit(Event{Type: "item_passed", Iteration: iteration, Item: it.ID, Message: fmt.Sprintf("%s passed (%s), commit %s", it.ID, summary, short(commit)), Data: map[string]any{"commit": commit}})
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

// Rejection is the verdict on an iteration whose role did not approve:
// a failed claim, with the findings as the next iteration's context.
func Rejection(a *Attempt) Verdict {
	return Verdict{Claimed: true, Summary: "the " + a.Role + " asked for changes",
		Failure: "The " + a.Role + " reviewed the work and did not approve it. Address these findings:\n\n" + gate.Trim(a.Rejected, 4<<10)}
}

// AgentFailure renders a failed agent run as a verdict (no gates run: the
// run itself did not finish).
func AgentFailure(r agent.Result) Verdict {
	what := fmt.Sprintf("agent exited with code %d", r.ExitCode)
	if r.TimedOut {
		what = "agent timed out and was killed"
	}
	msg := what
	if r.ErrorText != "" {
		msg += ": " + r.ErrorText
	}
	return Verdict{Summary: what, Failure: "The previous agent run did not finish: " + gate.Trim(msg, 2000)}
}

// appendReview puts a role's verdict and findings into progress, under
// "Review Notes" as seed 003's reviewer writes them.
func (e *Engine) appendReview(x *iteration) {
	var b strings.Builder
	fmt.Fprintf(&b, "\n## %s · %s %s · iteration %d · Review Notes (%s)\n\n- Verdict: %s\n", e.cfg.Clock.Now().UTC().Format(time.RFC3339), x.it.Kind, x.it.ID, x.cur.Iteration, x.att.Role, x.verdict)
	if f := strings.TrimSpace(roles.ParseVerdict(x.att.Result.FinalText).Findings); f != "" {
		b.WriteString("- Findings:\n")
		for _, l := range strings.Split(gate.Trim(f, 4<<10), "\n") {
			fmt.Fprintf(&b, "  %s\n", l)
		}
	}
	e.logProgress([]byte(strings.TrimRight(b.String(), "\n")))
	e.emit(Event{Type: "review_verdict", Iteration: x.cur.Iteration, Item: x.it.ID, Message: fmt.Sprintf("%s: the %s says %s", x.it.ID, x.att.Role, x.verdict),
		Data: map[string]any{"role": x.att.Role, "verdict": string(x.verdict)}})
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
	what := firstWords(att.Result.FinalText, e.cfg.Promise)
	if what == "" {
		what = "(the agent said nothing)"
	}
	fmt.Fprintf(&b, "- What changed: %s\n", what)
	commitAndFiles(&b, commit, "Files", files)
	if len(att.Learnings) > 0 {
		fmt.Fprintf(&b, "- Learnings: %s\n", strings.Join(att.Learnings, "; "))
	}
	fmt.Fprintf(&b, "- Iterations: %d (%s)\n", len(is.Iterations), plural(is.Attempts, "failed attempt"))
	switch u := is.Usage; {
	case u == nil:
		b.WriteString("- Cost: not reported by the agent\n")
	case u.CostUSD > 0:
		fmt.Fprintf(&b, "- Cost: $%.4f (%d input, %d output tokens)\n", u.CostUSD, u.InputTokens, u.OutputTokens)
	default:
		fmt.Fprintf(&b, "- Cost: %d input, %d output tokens\n", u.InputTokens, u.OutputTokens)
	}
	_ = store.AppendLog(p, []byte(strings.TrimRight(b.String(), "\n")))
}

// commitAndFiles writes the "- Commit:" and file-list lines of a progress
// or summary entry (at most 20 files named).
func commitAndFiles(b *strings.Builder, commit, label string, files []string) {
	if commit != "" {
		fmt.Fprintf(b, "- Commit: %s\n", short(commit))
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
