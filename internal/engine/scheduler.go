package engine

import (
	"context"
	"fmt"
	"os"
	"time"
)

type workerDone struct {
	id  string
	err error
}

// schedule is the one scheduler: a ready queue (not dependency levels) and
// at most Parallel agents at once (agentSlots). An item starts as soon as
// the source says it is ready and decideStop allows it; with Parallel = 1
// this is the sequential loop.
func (e *Engine) schedule(ctx context.Context) (Outcome, error) {
	wctx, cancelWorkers := context.WithCancel(ctx)
	defer cancelWorkers()
	running := map[string]bool{}
	done := make(chan workerDone)
	var stopStatus, stopReason string
	var fatal error

	for {
		for stopStatus == "" && fatal == nil && e.slots.free() {
			if e.pauseHeld(ctx) {
				break // the iterations under way finish; no new one starts
			}
			e.takeDecisions()
			e.takeAnswers()
			snap := e.box.snapshot()
			it, err := e.next(snap, running)
			if err != nil {
				fatal = err
				break
			}
			if stopStatus, stopReason = e.decideStop(ctx, snap, it, len(running)); stopStatus != "" {
				e.consumeStop(stopStatus)
				break
			}
			if it == nil || !e.slots.tryTake(it.ID) {
				break // nothing ready, or a resolver took the slot meanwhile
			}
			e.watching = false
			running[it.ID] = true
			number := 0
			// Reserved in memory; begin's write records it with the iteration.
			e.box.mutate(func(st *State) { st.Iteration++; number = st.Iteration })
			go func(it *Item, number int) {
				err := e.iterate(wctx, it, number)
				done <- workerDone{id: it.ID, err: err}
			}(it, number)
		}
		if len(running) == 0 {
			switch {
			case fatal != nil:
				return e.stop(StatusError, fatal.Error()), fatal
			case ctx.Err() != nil:
				return e.stop(StatusInterrupted, "interrupted (SIGINT)"), nil
			case stopStatus != "":
				return e.stop(stopStatus, stopReason), nil
			}
			if e.pauseHeld(ctx) {
				if err := e.waitPaused(ctx); err != nil {
					return e.stop(StatusInterrupted, "interrupted (SIGINT)"), nil
				}
				continue
			}
			if a := e.asking(e.runID()); len(a.waiting) > 0 {
				if err := e.waitForAnswers(ctx, a); err != nil {
					return e.stop(StatusInterrupted, "interrupted (SIGINT)"), nil
				}
				continue
			}
			e.awaiting = false
			// Nothing runs, nothing is ready, and the run watches for work.
			if err := e.watch(ctx); err != nil {
				return e.stop(StatusInterrupted, "interrupted (SIGINT)"), nil
			}
			continue
		}
		var d workerDone
		select {
		case d = <-done:
		case <-e.slots.wake:
			continue // a worker's agent work is over: start the next item
		}
		delete(running, d.id)
		e.slots.done(d.id)
		// In memory only: the next write (the next iteration's, or the
		// stop's) carries it, and a run that opens syncs again anyway.
		var serr error
		e.box.mutate(func(st *State) { serr = e.syncState(st, syncIteration) })
		if serr != nil {
			e.emit(Event{Type: "source_error", Message: serr.Error()})
		}
		if d.err != nil && ctx.Err() == nil && fatal == nil {
			fatal = fmt.Errorf("%s: %w", d.id, d.err)
			cancelWorkers()
		}
	}
}

// pauseHeld reports whether the pause file holds new iterations back: it
// exists, no stop is asked for (a stop wins), and the run is not being
// interrupted.
func (e *Engine) pauseHeld(ctx context.Context) bool {
	if ctx.Err() != nil {
		return false
	}
	if e.cfg.Paths.stopRequested() != "" {
		return false
	}
	_, err := os.Stat(e.cfg.Paths.Pause)
	return err == nil
}

// waitPaused waits, with nothing running, until the pause file is gone
// (or a stop is asked for), saying so once each way.
func (e *Engine) waitPaused(ctx context.Context) error {
	e.emit(Event{Type: "paused", Message: "paused: no new iteration starts until `ralph resume` (or p in the dashboard)"})
	for e.pauseHeld(ctx) {
		if err := e.cfg.Clock.Sleep(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	e.emit(Event{Type: "resumed", Message: "resumed"})
	return nil
}

// watch waits one interval for new work without running an agent.
func (e *Engine) watch(ctx context.Context) error {
	cfg := &e.cfg
	if !e.watching {
		e.watching = true
		e.emit(Event{Type: "watching", Message: fmt.Sprintf("nothing is ready; watching %s every %s (no agent runs, no tokens spent)", e.info().Path, cfg.Watch)})
	}
	if err := cfg.Clock.Sleep(ctx, cfg.Watch); err != nil {
		return err
	}
	var serr error
	_ = e.box.update(func(st *State) { serr = e.syncState(st, SyncPoll) })
	if serr != nil {
		e.emit(Event{Type: "source_error", Message: serr.Error()})
	}
	return nil
}
