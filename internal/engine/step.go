package engine

import (
	"context"
	"fmt"
	"os"
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
	cfg := &e.cfg
	if err := os.MkdirAll(cfg.Paths.Dir, 0o755); err != nil {
		return StepResult{}, err
	}
	lock, err := lockRun(cfg.Paths.Lock)
	if err != nil {
		return StepResult{}, err
	}
	defer lock.Unlock()
	st, _, err := e.loadOrStart(ctx)
	if err != nil {
		return StepResult{}, err
	}
	e.box = &stateBox{st: st, path: cfg.Paths.State, now: cfg.Clock.Now}
	_ = e.box.update(func(st *State) { st.Status = StatusRunning; st.StopReason = "" })

	var res StepResult
	var cur *Current
	e.box.read(func(st *State) {
		if len(st.Current) > 0 {
			cur = st.Current[0]
		}
	})
	if conclude && cur != nil {
		it := e.itemByID(cur.Item)
		if it != nil {
			tr, err := openTranscript(cfg.Paths.Transcripts, cur.Iteration, it.ID)
			if err != nil {
				return res, err
			}
			fmt.Fprintf(tr, "%s\n", final)
			prompt, _ := os.ReadFile(cfg.Paths.PromptFile)
			dir, err := cfg.Source.Prepare(ctx, it, e.box.snapshot())
			if err != nil {
				tr.Close()
				return res, err
			}
			att := &Attempt{Item: it, Dir: dir, Promise: cfg.Promise, Log: tr, Prompt: string(prompt)}
			att.Result.FinalText = final
			e.emit(Event{Type: "agent_finished", Iteration: cur.Iteration, Item: it.ID, Attempt: cur.Attempt, Message: "the agent's session ended its turn (stop hook)"})
			if err := e.claimed(att, att.Result.Usage); err != nil {
				tr.Close()
				return res, err
			}
			err = e.conclude(ctx, it, cur, att)
			tr.Close()
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
		prompt, _ := os.ReadFile(cfg.Paths.PromptFile)
		res.Prompt, res.Item, res.Iteration = string(prompt), e.itemByID(cur.Item), cur.Iteration
		e.box.read(func(st *State) { res.MaxIterations = st.MaxIterations })
		return res, nil
	}

	// What next: the same limits as the scheduler.
	if status, reason := e.checkStops(ctx); status != "" {
		return e.finish(status, reason), nil
	}
	var snap State
	e.box.read(func(st *State) { snap = *st })
	it, err := cfg.Source.Next(e.box.snapshot(), nil)
	if err != nil {
		return res, err
	}
	if it == nil {
		passed, blocked, total := snap.Counts()
		if passed == total {
			return e.finish(StatusComplete, fmt.Sprintf("all %s passed", plural(total, e.kind()))), nil
		}
		return e.finish(StatusBlocked, fmt.Sprintf("no %s can start: %d passed, %d blocked", e.kind(), passed, blocked)), nil
	}
	if snap.Counted() >= snap.MaxIterations {
		return e.finish(StatusMaxIterations, fmt.Sprintf("max iterations (%d) reached with work left", snap.MaxIterations)), nil
	}
	if reason := e.breakerOpen(); reason != "" {
		return e.finish(StatusBlocked, reason), nil
	}
	iteration := 0
	if err := e.box.update(func(st *State) { st.Iteration++; iteration = st.Iteration }); err != nil {
		return res, err
	}
	c, att, err := e.begin(ctx, it, iteration)
	if err != nil {
		return res, err
	}
	att.Log.Close()
	res.Prompt, res.Item, res.Iteration, res.MaxIterations = att.Prompt, it, c.Iteration, snap.MaxIterations
	return res, nil
}

func (e *Engine) finish(status, reason string) StepResult {
	o := e.stop(status, reason)
	return StepResult{Done: true, Status: o.Status, Reason: o.Reason, Iteration: o.State.Iteration, MaxIterations: o.State.MaxIterations}
}
