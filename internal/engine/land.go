package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ralph-loop/ralph/internal/gate"
	"github.com/ralph-loop/ralph/internal/judge"
	"github.com/ralph-loop/ralph/internal/land"
	"github.com/ralph-loop/ralph/internal/roles"
	"github.com/ralph-loop/ralph/internal/store"
)

// lander is the one owner of branch (land.Lander), made on first use:
// at known, the newest commit the source knows landed there, or the
// branch's tip. A branch found rewritten is put back and reported — or,
// made for a judgement (the agent ran in an earlier process: the Stop
// hook, a resume while verifying), left to the judge's refs check,
// which fails the claim.
func (e *Engine) lander(ctx context.Context, branch, known string, judging bool) (*land.Lander, error) {
	if branch == "" {
		return nil, nil
	}
	e.landMu.Lock()
	defer e.landMu.Unlock()
	if l := e.landers[branch]; l != nil {
		return l, nil
	}
	report := func(report string) { e.emit(Event{Type: "tamper_detected", Message: report}) }
	if judging {
		report = nil
	}
	l, err := e.cfg.Judge.Lander(ctx, branch, known, report)
	if err != nil {
		return nil, err
	}
	if e.landers == nil {
		e.landers = map[string]*land.Lander{}
	}
	e.landers[branch] = l
	return l, nil
}

// closeLanders ends every queue: nothing lands after the run stops (or
// after the step a Stop hook drives: its next step makes its own).
func (e *Engine) closeLanders() {
	e.landMu.Lock()
	defer e.landMu.Unlock()
	for _, l := range e.landers {
		l.Close()
	}
	e.landers = nil
}

// baseliner is a source with run-wide gates the judge takes on the base
// before any agent runs, and the revision they run on.
type baseliner interface {
	BaselineGates(ctx context.Context) (string, []gate.Gate)
}

// openJudge readies the run's judge once the run is open: the dependency
// folders as the base has them, the run-wide gates on the base. What
// fails there is work for the run: listed up front, never blamed on an
// item, never called passed.
func (e *Engine) openJudge(ctx context.Context) error {
	var rev string
	var gates []gate.Gate
	if b, ok := e.cfg.Source.(baseliner); ok {
		rev, gates = b.BaselineGates(ctx)
	}
	// The log is made when the gates run: a resume that reuses the
	// baseline keeps the output it was taken with.
	log := &lazyFile{path: filepath.Join(e.cfg.Paths.Dir, "baseline.log")}
	defer log.Close()
	opened, err := e.cfg.Judge.Open(ctx, e.runID(), rev, gates, log)
	if err != nil {
		return fmt.Errorf("the judge: %w", err)
	}
	red := opened.Red
	_ = e.box.update(func(st *State) { st.BaseRed, st.NoInventory = opened.RedRefs, opened.NoInventory })
	if len(red) > 0 {
		e.emit(Event{Type: "base_red", Message: fmt.Sprintf("the base already fails before any agent ran (work for this run, never blamed on a %s; see .ralph/baseline.log): %s", e.info().ItemKind, strings.Join(red, "; ")),
			Data: map[string]any{"red": red}})
	}
	return nil
}

// beginJudging pins the item's contract at its base and takes the refs as
// they are, before the agent runs: kept in .ralph/judge/refs/ so a
// verdict after a crash compares with the same.
func (e *Engine) beginJudging(ctx context.Context, x *Iteration) {
	terms := e.cfg.Source.Terms(x.Item, e.box.snapshot())
	// The branch's owner is made before any agent of the run could move
	// the branch: its tip is what landed, not what an agent left.
	if _, err := e.lander(ctx, terms.Target, terms.Tip, false); err != nil {
		e.emit(Event{Type: "source_error", Item: x.Item.ID, Message: "reading the branch the work lands on: " + err.Error()})
	}
	contract, refs := e.cfg.Judge.Begin(ctx, x.Item.ID, x.Current.BaseHead, terms)
	x.contract, x.refs = contract, refs
	_ = store.WriteJSON(e.refsFile(x.Item.ID), refs)
}

// refsFile keeps the refs an item's agent started with.
func (e *Engine) refsFile(id string) string {
	return filepath.Join(e.cfg.Paths.Dir, "judge", "refs", safeFileName(id)+".json")
}

// judgeAttempt has the judge judge an attempt: the source's word (its
// claim), then every check, on exactly the tree that would land.
func (e *Engine) judgeAttempt(ctx context.Context, x *Iteration, att *Attempt) Verdict {
	snap := e.box.snapshot()
	claim := e.cfg.Source.Terms(x.Item, snap)
	if x.refs == nil {
		var refs map[string]string
		if store.ReadJSON(e.refsFile(x.Item.ID), &refs) == nil {
			x.refs = refs
		}
	}
	known := claim.Tip
	if at := x.refs["refs/heads/"+claim.Target]; at != "" {
		known = at // where the branch was when the agent started
	}
	l, err := e.lander(ctx, claim.Target, known, true)
	if err != nil {
		return Verdict{Claimed: att.Claimed, Summary: "could not read the branch the work lands on", Failure: err.Error()}
	}
	c := &judge.Case{Item: x.Item.ID, Title: x.Item.Title, Kind: x.Item.Kind, Iteration: x.Current.Iteration, Attempt: x.Current.Attempt,
		RunID: snap.RunID, Role: att.Role, Approved: x.RoleVerdict == roles.Approve && x.Item.Role == "", Rejected: att.Rejected,
		Dir: att.Dir, Base: x.Current.BaseHead, Claimed: att.Claimed, Preexisting: snap.Preexisting, Since: snap.EnvSince(),
		RefsBefore: x.refs, Learnings: att.Learnings, Claim: claim, Lander: l}
	if att.Log != nil {
		c.Log = att.Log
	}
	c.Read = func(ctx context.Context) judge.Claim { return e.cfg.Source.Claim(ctx, att, snap) }
	if e.cfg.Policy != nil {
		c.Policy = e.cfg.Policy
	}
	if att.Result.Failed() {
		v := judge.AgentFailure(att.Result)
		c.AgentFailed = &v
	}
	x.judged = c
	return e.maskVerdict(e.cfg.Judge.Judge(ctx, c))
}

// commit lands a verified item through its branch's lander and marks it
// passed. When the branch moved on in a way its judgement did not cover
// (a story ahead did not land), the work is judged again on the new end
// and lands then; a merge conflict goes to a resolver.
func (e *Engine) commit(ctx context.Context, x *Iteration, v Verdict) error {
	it, cur := x.Item, x.Current
	if x.Workspace.Isolated {
		// The item's work waits in a tree of its own: its slot goes to the
		// next item.
		e.slots.release(it.ID)
	}
	// Durable: after a power cut, this is what tells a resume to look for
	// the item's commit (Source.Recover) instead of running it again.
	_ = e.box.updateDurable(func(st *State) { cur.Phase = PhaseCommit })
	for round := 0; ; round++ {
		l := x.judged.Lander
		if v.Ticket == nil || l == nil {
			return e.landed(ctx, x, v, "")
		}
		if ahead := l.Ahead(v.Ticket); ahead > 0 {
			e.box.mutate(func(st *State) { cur.QueuePos = ahead + 1 })
			e.emit(Event{Type: "merge_queued", Iteration: cur.Iteration, Item: it.ID, Message: fmt.Sprintf("%s waits to land on %s behind %s", it.ID, l.Branch(), Plural(ahead, "item"))})
		}
		sha, err := l.Land(ctx, v.Ticket, v.Message, e.follow(x, v))
		var ae *land.ApplyError
		switch {
		case err == nil, errors.As(err, &ae):
			if ae != nil {
				e.emit(Event{Type: "source_error", Item: it.ID, Message: ae.Error()})
			}
			return e.landed(ctx, x, v, sha)
		case errors.Is(err, land.ErrStale) && ctx.Err() == nil && round < 10:
			fmt.Fprintf(x.Attempt.Log, "\nralph: %s is stale (%v): judged again on %s as it is now\n", it.ID, err, l.Branch())
			e.emit(Event{Type: "merge_stale", Iteration: cur.Iteration, Item: it.ID, Message: fmt.Sprintf("%s is stale (%s); judged again on %s as it is now", it.ID, strings.TrimPrefix(err.Error(), "stale: "), l.Branch())})
			nv := e.maskVerdict(e.cfg.Judge.Rejudge(ctx, x.judged))
			e.reportVerdict(x, nv)
			if nv.Conflict != nil {
				if nv, err = e.resolve(ctx, x, nv); err != nil {
					return err
				}
			}
			if !nv.Passed {
				e.emit(Event{Type: "merge_rejected", Iteration: cur.Iteration, Item: it.ID, Message: fmt.Sprintf("%s: %s", it.ID, nv.Summary)})
				return e.notPassed(ctx, x, nv, Decision{})
			}
			v = nv
		case ctx.Err() != nil:
			return ctx.Err()
		default:
			return err
		}
	}
}

// follow is what brings the item's checkout along once it landed (the
// workspace's Follow), run by the lander before anything else lands.
func (e *Engine) follow(x *Iteration, v Verdict) land.Apply {
	if x.Workspace.Follow == nil {
		return nil
	}
	return func(ctx context.Context, old, landed string) error {
		return x.Workspace.Follow(ctx, v, old, landed)
	}
}

// landed records an item whose work landed as commit sha: the source's
// model follows, the baseline advances, the item is passed.
func (e *Engine) landed(ctx context.Context, x *Iteration, v Verdict, sha string) error {
	it, cur, att := x.Item, x.Current, x.Attempt
	if v.Files != nil {
		att.Files, x.Files = v.Files, v.Files
	}
	if err := e.cfg.Source.Landed(ctx, att, v, sha, e.box.snapshot()); err != nil {
		e.emit(Event{Type: "source_error", Item: it.ID, Message: "after " + it.ID + " landed: " + err.Error()})
	}
	if sha != "" {
		e.cfg.Judge.Landed(it.ID, v, sha)
	}
	_ = os.Remove(e.refsFile(it.ID))
	e.appendProgress(it, cur, "passed", v, att.Learnings, x.Files, sha)
	e.markPassed(it, cur.Iteration, sha, v.Summary)
	if sha != "" {
		// What is still red since the base is what this landing left red.
		_ = e.box.update(func(st *State) { st.BaseRed = v.StillRed })
	}
	e.appendSummary(it, att, x.Files, sha)
	fmt.Fprintf(att.Log, "\n[ralph] %s passed: %s; commit %s\n", it.ID, v.Summary, ShortSHA(sha))
	// Dependents may start now.
	e.slots.poke()
	return nil
}

// resolverPrompt introduces a conflict-resolution iteration.
const resolverPrompt = `You are resolving a merge conflict in a Ralph loop. The work tree is the branch of %s (%s), in the middle of merging the current %s into it. Resolve every conflict so that both sides' intent is kept: edit the conflicted files, remove all conflict markers, and make the project's checks pass. Do not commit: the harness records the work after its gates pass.

%s

When the conflicts are resolved and the checks pass, end your final message with <promise>%s</promise>.`

// resolve runs one resolver in the item's tree for a verdict whose work
// does not merge, and judges its work. The resolver is an agent like any
// other (runAside): the same request, its own prompt, its output in the
// iteration's transcript.
func (e *Engine) resolve(ctx context.Context, x *Iteration, v Verdict) (Verdict, error) {
	cfg := &e.cfg
	it, cur, att := x.Item, x.Current, x.Attempt
	src, ok := cfg.Source.(conflicted)
	if !ok || x.resolved {
		return v, nil
	}
	x.resolved = true
	e.emit(Event{Type: "merge_conflict", Iteration: cur.Iteration, Item: it.ID, Message: fmt.Sprintf("%s conflicts with %s in %s; running a resolver", it.ID, x.judged.Claim.Target, strings.Join(v.Conflict.Paths, ", "))})
	context_, err := src.Conflict(ctx, it, v.Conflict.Paths)
	if err != nil {
		return v, err
	}
	prompt := fmt.Sprintf(resolverPrompt, it.ID, it.Title, x.judged.Claim.Target, context_, cfg.Prompt.Promise)
	fmt.Fprintf(att.Log, "\n## Conflict resolver\n\n%s\n\n", prompt)
	pf := e.promptFile(it.ID)
	if err := writeFile(pf, prompt); err != nil {
		return v, err
	}
	res, err := e.runAside(ctx, x, aside{role: "resolver", label: "resolve", agent: e.defaultAgent(), prompt: prompt, promptFile: pf, log: att.Log, runs: cur.Attempt})
	if err != nil {
		return v, err
	}
	ratt := *att
	ratt.Result, ratt.Prompt, ratt.Role, ratt.Rejected = res, prompt, "", ""
	e.readSignals(&ratt)
	rv := e.judgeAttempt(ctx, x, &ratt)
	e.reportVerdict(x, rv)
	if rv.Passed {
		e.emit(Event{Type: "conflict_resolved", Iteration: cur.Iteration, Item: it.ID, Message: fmt.Sprintf("resolver cleared the conflict for %s (%s)", it.ID, rv.Summary)})
	} else {
		rv.Summary = "conflict resolution failed: " + rv.Summary
		if rv.Failure == "" {
			rv.Failure = context_
		}
	}
	return rv, nil
}

// lazyFile is a file made (truncated) on its first write.
type lazyFile struct {
	path string
	f    *os.File
	err  error
}

func (l *lazyFile) Write(p []byte) (int, error) {
	if l.f == nil && l.err == nil {
		l.f, l.err = os.Create(l.path)
	}
	if l.err != nil {
		return 0, l.err
	}
	return l.f.Write(p)
}

func (l *lazyFile) Close() error {
	if l.f == nil {
		return nil
	}
	return l.f.Close()
}
