package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Rejected is returned by Source.Accept when the integrated result failed
// (e.g. the gates on the feature branch after a squash merge): the merge is
// undone and the item goes back to work with Failure as retry context.
type Rejected struct {
	Summary string
	Failure string
}

func (r *Rejected) Error() string { return r.Summary }

// Conflict is returned by Source.Accept when merging hit conflicts. The
// source has left the conflicted merge in the item's work tree; the engine
// runs a resolver iteration there with Context in its prompt, verifies, and
// tries Accept again.
type Conflict struct {
	Paths   []string
	Context string
}

func (c *Conflict) Error() string { return "merge conflict in " + strings.Join(c.Paths, ", ") }

// accept records a verified item through the merge queue (one Accept at
// a time, first come first served). Committing the work in the item's own
// tree and a conflict resolver run outside the queue, so they never hold
// up other merges. It returns a non-nil verdict when the item did not make
// it and must be treated as a failed iteration.
func (e *Engine) accept(ctx context.Context, x *Iteration, v Verdict) (string, *Verdict, error) {
	it, cur, att := x.Item, x.Current, x.Attempt
	if x.Workspace.Isolated() {
		// The item's work is verified in a tree of its own: committing it
		// there and the merge queue run no agent, so its slot goes to the
		// next item.
		e.slots.release(it.ID)
	}
	for round := 0; ; round++ {
		if x.Workspace.Commit != nil {
			if err := x.Workspace.Commit(ctx, att, v); err != nil {
				var rej *Rejected
				if errors.As(err, &rej) {
					e.emit(Event{Type: "merge_rejected", Iteration: cur.Iteration, Item: it.ID, Message: fmt.Sprintf("%s: %s", it.ID, rej.Summary)})
					return "", &Verdict{Summary: rej.Summary, Failure: rej.Failure, Claimed: true}, nil
				}
				return "", nil, err
			}
		}
		commit, err := e.acceptQueued(ctx, x, v)
		var rej *Rejected
		var conf *Conflict
		switch {
		case err == nil:
			return commit, nil, nil
		case errors.As(err, &rej):
			undone := "not committed"
			if x.Workspace.Isolated() {
				undone = "merge undone"
			}
			e.emit(Event{Type: "merge_rejected", Iteration: cur.Iteration, Item: it.ID, Message: fmt.Sprintf("%s: %s; %s", it.ID, rej.Summary, undone)})
			return "", &Verdict{Summary: rej.Summary, Failure: rej.Failure, Claimed: true}, nil
		case errors.As(err, &conf) && round == 0:
			e.emit(Event{Type: "merge_conflict", Iteration: cur.Iteration, Item: it.ID, Message: fmt.Sprintf("%s conflicts with the feature branch in %s; running a resolver", it.ID, strings.Join(conf.Paths, ", "))})
			rv, err := e.resolve(ctx, x, conf)
			if err != nil {
				return "", nil, err
			}
			if !rv.Passed {
				return "", rv, nil
			}
			v = *rv
		case errors.As(err, &conf):
			return "", &Verdict{Summary: "merge conflict remains after the resolver", Failure: conf.Context}, nil
		default:
			return "", nil, err
		}
	}
}

// acceptQueued runs one Source.Accept in the merge queue.
func (e *Engine) acceptQueued(ctx context.Context, x *Iteration, v Verdict) (string, error) {
	it, cur := x.Item, x.Current
	ticket := e.merge.take()
	// Durable: after a power cut, this is what tells a resume to look for
	// the item's commit (Source.Recover) instead of running it again.
	_ = e.box.updateDurable(func(st *State) { cur.Phase = PhaseCommit; cur.QueuePos = e.merge.position(ticket) })
	if pos := e.merge.position(ticket); pos > 1 {
		e.emit(Event{Type: "merge_queued", Iteration: cur.Iteration, Item: it.ID, Message: fmt.Sprintf("%s waits in the merge queue at position %d", it.ID, pos)})
	}
	e.merge.wait(ticket)
	defer e.merge.release()
	e.box.mutate(func(st *State) { cur.QueuePos = 1 })
	return e.cfg.Source.Accept(ctx, x.Attempt, v, e.box.snapshot())
}

// resolverPrompt introduces a conflict-resolution iteration.
const resolverPrompt = `You are resolving a merge conflict in a Ralph loop. The work tree is the branch of %s (%s), in the middle of merging the current feature branch into it. Resolve every conflict so that both sides' intent is kept: edit the conflicted files, remove all conflict markers, and make the project's checks pass. Do not commit: the harness completes the merge after its gates pass.

%s

When the conflicts are resolved and the checks pass, end your final message with <promise>%s</promise>.`

// resolve runs one resolver in the item's tree and verifies its work. The
// resolver is an agent like any other (runAside): the same request
// (environment, timeout) with its own prompt, written to the item's prompt
// file, its output in the iteration's transcript.
func (e *Engine) resolve(ctx context.Context, x *Iteration, conf *Conflict) (*Verdict, error) {
	cfg := &e.cfg
	it, cur, att := x.Item, x.Current, x.Attempt
	prompt := fmt.Sprintf(resolverPrompt, it.ID, it.Title, conf.Context, cfg.Prompt.Promise)
	fmt.Fprintf(att.Log, "\n## Conflict resolver\n\n%s\n\n", prompt)
	pf := e.promptFile(it.ID)
	if err := writeFile(pf, prompt); err != nil {
		return nil, err
	}
	// Scripts and transcripts tell the resolver's run from the worker's.
	res, err := e.runAside(ctx, x, aside{role: "resolver", label: "resolve", agent: e.defaultAgent(), prompt: prompt, promptFile: pf, log: att.Log, runs: cur.Attempt})
	if err != nil {
		return nil, err
	}
	ratt := *att
	ratt.Result = res
	ratt.Prompt = prompt
	e.readSignals(&ratt)
	v := e.maskVerdict(cfg.Source.Verify(ctx, &ratt, e.box.snapshot()))
	if v.Passed {
		e.emit(Event{Type: "conflict_resolved", Iteration: cur.Iteration, Item: it.ID, Message: fmt.Sprintf("resolver cleared the conflict for %s (%s)", it.ID, v.Summary)})
	} else {
		v.Summary = "conflict resolution failed: " + v.Summary
		if v.Failure == "" {
			v.Failure = conf.Context
		}
	}
	return &v, nil
}
