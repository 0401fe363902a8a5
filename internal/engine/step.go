package engine

import (
	"context"
	"fmt"
	"os"

	"github.com/ralph-loop/ralph/internal/proc"
)

// StepResult is what an external driver (the Stop hook) does next.
type StepResult struct {
	Done          bool   // the loop is over: let the agent stop
	Status        string // when Done: the run status
	Reason        string
	Prompt        string // when not Done: the next iteration's prompt
	Item          *Item
	Iteration     int
	MaxIterations int
	Verdict       *Verdict // of the iteration that just ended, if any
}

// Start records a run as armed for an external driver and begins its first
// iteration; the returned prompt is what the agent works on now.
func (e *Engine) Start(ctx context.Context) (StepResult, error) {
	return e.step(ctx, "", false)
}

// Step is one iteration boundary driven from outside: the agent ran in its
// own session and ended with final (its last assistant message). Step
// verifies and records that iteration exactly as `ralph run` would, then
// begins the next one and returns its prompt, or says the loop is over.
func (e *Engine) Step(ctx context.Context, final string) (StepResult, error) {
	return e.step(ctx, final, true)
}

func (e *Engine) step(ctx context.Context, final string, conclude bool) (StepResult, error) {
	lock, _, err := e.open(ctx)
	if err != nil {
		return StepResult{}, err
	}
	defer e.release(lock)
	if err := e.openJudge(ctx); err != nil {
		return StepResult{}, err
	}
	defer e.closeLanders()

	var res StepResult
	var cur *Current
	e.box.read(func(st *State) {
		if len(st.Current) > 0 {
			cur = st.Current[0]
		}
	})
	if conclude && cur != nil {
		if it := e.itemByID(cur.Item); it != nil {
			// The gates this call runs carry the iteration's tag; the hook
			// process is no subreaper, so their leftovers are looked for
			// among all processes (the tag is the run's and iteration's).
			ctx, tag := e.tagged(ctx, cur.Iteration)
			defer func() {
				if pids := proc.KillTagged(tag, true); len(pids) > 0 {
					e.emit(Event{Type: "leftovers_killed", Iteration: cur.Iteration, Item: it.ID, Message: fmt.Sprintf("killed %d process(es) iteration %d left running: pids %v", len(pids), cur.Iteration, pids)})
				}
			}()
			x, err := e.reattach(ctx, it, cur, final)
			if err != nil {
				return res, err
			}
			fmt.Fprintf(x.Attempt.Log, "%s\n", final)
			e.emit(Event{Type: "agent_finished", Iteration: cur.Iteration, Item: it.ID, Attempt: cur.Attempt, Message: "the agent's session ended its turn (stop hook)"})
			if err := e.signals(x); err != nil {
				x.Attempt.Log.Close()
				return res, err
			}
			err = e.conclude(ctx, x)
			x.Attempt.Log.Close()
			if err != nil {
				return res, err
			}
			e.box.read(func(st *State) {
				is := st.Items[it.ID]
				res.Verdict = &Verdict{Passed: is.Status == ItemPassed, Summary: is.LastResult}
			})
		}
	} else if cur != nil {
		// Already under way (armed twice, or a Start after a Step): hand
		// back the current prompt.
		prompt, _ := os.ReadFile(e.promptFile(cur.Item))
		res.Prompt, res.Item, res.Iteration = string(prompt), e.itemByID(cur.Item), cur.Iteration
		e.box.read(func(st *State) { res.MaxIterations = st.MaxIterations })
		return res, nil
	}

	// What next: the scheduler's own decision.
	if err := e.box.update(func(st *State) { err = e.syncState(st, syncIteration) }); err != nil {
		return res, err
	}
	e.takeDecisions()
	snap := e.box.snapshot()
	it, err := e.next(snap, nil)
	if err != nil {
		return res, err
	}
	if status, reason := e.decideStop(ctx, snap, it, 0); status != "" {
		e.consumeStop(status)
		return e.finish(status, reason), nil
	}
	if it == nil { // decideStop waits for new work only in watch mode
		if why := e.answersAwaited(snap.RunID); why != "" {
			return e.finish(StatusAwaitingAnswer, why), nil
		}
		return e.finish(StatusBlocked, "nothing is ready and the Stop-hook driver does not watch for new work"), nil
	}
	number := 0
	if err := e.box.update(func(st *State) { st.Iteration++; number = st.Iteration }); err != nil {
		return res, err
	}
	x, err := e.begin(ctx, it, number)
	if err != nil {
		return res, err
	}
	x.Attempt.Log.Close()
	res.Prompt, res.Item, res.Iteration, res.MaxIterations = x.s.Prompt, it, number, x.s.MaxIterations
	return res, nil
}

func (e *Engine) finish(status, reason string) StepResult {
	o := e.stop(status, reason)
	return StepResult{Done: true, Status: o.Status, Reason: o.Reason, Iteration: o.State.Iteration, MaxIterations: o.State.MaxIterations}
}
