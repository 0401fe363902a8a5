package engine

import (
	"context"
	"fmt"
	"os"
	"sync"
)

type workerDone struct {
	id  string
	err error
}

// schedule is the one scheduler: a ready queue (not dependency levels) and
// at most Parallel agents at once (agentSlots). An item starts as soon as
// the source says it is ready; with Parallel = 1 this is the sequential
// loop.
func (e *Engine) schedule(ctx context.Context) (Outcome, error) {
	cfg := &e.cfg
	wctx, cancelWorkers := context.WithCancel(ctx)
	defer cancelWorkers()
	running := map[string]bool{}
	done := make(chan workerDone)
	var stopStatus, stopReason string
	var fatal error

	for {
		if stopStatus == "" && fatal == nil {
			stopStatus, stopReason = e.checkStops(ctx)
		}
		for stopStatus == "" && fatal == nil && e.slots.free() {
			var snap State
			e.box.read(func(st *State) { snap = *st })
			it, err := cfg.Source.Next(e.box.snapshot(), running)
			if err != nil {
				fatal = err
				break
			}
			if it == nil {
				break
			}
			if snap.Counted() >= snap.MaxIterations {
				stopStatus, stopReason = StatusMaxIterations, fmt.Sprintf("max iterations (%d) reached with work left", snap.MaxIterations)
				break
			}
			if reason := e.breakerOpen(); reason != "" {
				stopStatus, stopReason = StatusBlocked, reason
				break
			}
			if !e.slots.tryTake(it.ID) {
				break // a resolver took the slot meanwhile
			}
			e.watching = false
			running[it.ID] = true
			iteration := 0
			// Reserved in memory; begin's write records it with the iteration.
			e.box.mutate(func(st *State) { st.Iteration++; iteration = st.Iteration })
			go func(it *Item, iteration int) {
				err := e.iterate(wctx, it, nil, iteration)
				done <- workerDone{id: it.ID, err: err}
			}(it, iteration)
		}
		if len(running) == 0 {
			if fatal != nil {
				return e.stop(StatusError, fatal.Error()), fatal
			}
			if ctx.Err() != nil {
				return e.stop(StatusInterrupted, "interrupted (SIGINT)"), nil
			}
			if stopStatus != "" {
				return e.stop(stopStatus, stopReason), nil
			}
			// Nothing runs and nothing can start.
			if cfg.Watch > 0 {
				if err := e.watch(ctx); err != nil {
					return e.stop(StatusInterrupted, "interrupted (SIGINT)"), nil
				}
				continue
			}
			var snap State
			e.box.read(func(st *State) { snap = *st })
			passed, blocked, total := snap.Counts()
			if passed == total {
				return e.stop(StatusComplete, fmt.Sprintf("all %s passed", plural(total, e.kind()))), nil
			}
			return e.stop(StatusBlocked, fmt.Sprintf("no %s can start: %d passed, %d blocked, %d waiting on blocked dependencies", e.kind(), passed, blocked, total-passed-blocked)), nil
		}
		var d workerDone
		select {
		case d = <-done:
		case <-e.slots.wake:
			continue // a worker's agent work is over: start the next item
		}
		delete(running, d.id)
		e.slots.done(d.id)
		_ = e.box.update(func(st *State) {
			e.syncItems(st)
			if s, ok := cfg.Source.(StateSyncer); ok {
				s.SyncState(st)
			}
		})
		if d.err != nil && ctx.Err() == nil && fatal == nil {
			fatal = fmt.Errorf("%s: %w", d.id, d.err)
			cancelWorkers()
		}
	}
}

// checkStops returns a stop status when the run must not start new work:
// Ctrl-C, the stop file, a budget. Running workers finish first.
func (e *Engine) checkStops(ctx context.Context) (string, string) {
	cfg := &e.cfg
	if ctx.Err() != nil {
		return StatusInterrupted, "interrupted (SIGINT)"
	}
	if _, err := os.Stat(cfg.Paths.Stop); err == nil {
		_ = os.Remove(cfg.Paths.Stop)
		return StatusStopped, "stop requested (.ralph/stop)"
	}
	var snap State
	e.box.read(func(st *State) { snap = *st })
	if cfg.MaxCost > 0 && snap.Usage.CostUSD >= cfg.MaxCost {
		return StatusBudget, fmt.Sprintf("budget: cost $%.4f reached --max-cost $%.4f", snap.Usage.CostUSD, cfg.MaxCost)
	}
	if tok := snap.Usage.InputTokens + snap.Usage.OutputTokens; cfg.MaxTokens > 0 && tok >= cfg.MaxTokens {
		return StatusBudget, fmt.Sprintf("budget: %d tokens reached --max-tokens %d", tok, cfg.MaxTokens)
	}
	return "", ""
}

// watch waits one interval for new work without running an agent.
func (e *Engine) watch(ctx context.Context) error {
	cfg := &e.cfg
	if !e.watching {
		e.watching = true
		e.emit(Event{Type: "watching", Message: fmt.Sprintf("nothing is ready; watching %s every %s (no agent runs, no tokens spent)", cfg.Source.Path(), cfg.Watch)})
	}
	if err := cfg.Clock.Sleep(ctx, cfg.Watch); err != nil {
		return err
	}
	if r, ok := cfg.Source.(Reloader); ok {
		if err := r.Reload(); err != nil {
			e.emit(Event{Type: "source_error", Message: err.Error()})
		}
		_ = e.box.update(func(st *State) { e.syncItems(st) })
	}
	return nil
}

// ticketLock is a FIFO mutex: the merge queue. Waiters are served in the
// order they arrived, and each knows its position.
type ticketLock struct {
	mu      sync.Mutex
	cond    *sync.Cond
	next    int // next ticket to hand out
	serving int
}

func (l *ticketLock) take() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cond == nil {
		l.cond = sync.NewCond(&l.mu)
	}
	t := l.next
	l.next++
	return t
}

// position is how many are ahead of ticket t, plus one.
func (l *ticketLock) position(t int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return t - l.serving + 1
}

func (l *ticketLock) wait(t int) {
	l.mu.Lock()
	for l.serving != t {
		l.cond.Wait()
	}
	l.mu.Unlock()
}

func (l *ticketLock) release() {
	l.mu.Lock()
	l.serving++
	l.cond.Broadcast()
	l.mu.Unlock()
}
