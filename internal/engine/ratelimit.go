package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/ralph-loop/ralph/internal/agent"
)

// rateLimited records a limit hit: the iteration is undone (no attempt,
// no iteration spent) and every worker waits until the reset time, or a
// backoff that doubles from RateLimitBackoff up to RateLimitMaxWait.
func (e *Engine) rateLimited(it *Item, cur *Current, rl *agent.RateLimit) error {
	now := e.cfg.Clock.Now()
	until := rl.ResetAt
	e.backoffMu.Lock()
	if until.IsZero() || !until.After(now) {
		if e.backoff == 0 {
			e.backoff = e.cfg.RateLimit.Backoff
		} else {
			e.backoff *= 2
		}
		if e.backoff > e.cfg.RateLimit.MaxWait {
			e.backoff = e.cfg.RateLimit.MaxWait
		}
		until = now.Add(e.backoff)
	}
	e.backoffMu.Unlock()
	if until.Sub(now) > e.cfg.RateLimit.MaxWait {
		until = now.Add(e.cfg.RateLimit.MaxWait)
	}
	until = until.UTC()
	err := e.box.update(func(st *State) {
		st.RateLimitedAt = &until
		st.dropCurrent(it.ID)
		st.Refunds++
		s := st.Item(it.ID)
		s.Status = ItemPending
		if n := len(s.Iterations); n > 0 {
			s.Iterations = s.Iterations[:n-1]
		}
	})
	e.emit(Event{Type: "rate_limited", Iteration: cur.Iteration, Item: it.ID,
		Message: fmt.Sprintf("rate limited (%s): waiting until %s; %s will be retried without spending an attempt", rl.Message, until.Format(time.RFC3339), it.ID),
		Data:    map[string]any{"until": until}})
	return err
}

// waitForRateLimit pauses before an agent starts while the run is
// rate-limited.
func (e *Engine) waitForRateLimit(ctx context.Context) error {
	var until *time.Time
	e.box.read(func(st *State) { until = st.RateLimitedAt })
	if until != nil {
		if d := until.Sub(e.cfg.Clock.Now()); d > 0 {
			if err := e.cfg.Clock.Sleep(ctx, d); err != nil {
				return err
			}
		}
		if err := e.box.update(func(st *State) { st.RateLimitedAt = nil }); err != nil {
			return err
		}
	}
	return e.takeCall(ctx)
}

// takeCall counts an agent start against --max-calls-per-hour, first
// waiting while the last hour already had that many.
func (e *Engine) takeCall(ctx context.Context) error {
	n := e.cfg.RateLimit.MaxCallsPerHour
	if n <= 0 {
		return nil
	}
	said := false
	for {
		var wait time.Time
		now := e.cfg.Clock.Now().UTC()
		err := e.box.update(func(st *State) {
			kept := st.AgentCalls[:0]
			for _, t := range st.AgentCalls {
				if now.Sub(t) < time.Hour {
					kept = append(kept, t)
				}
			}
			st.AgentCalls = kept
			if len(kept) < n {
				st.AgentCalls = append(st.AgentCalls, now)
				return
			}
			wait = kept[len(kept)-n].Add(time.Hour)
		})
		if err != nil || wait.IsZero() {
			return err
		}
		if !said {
			said = true
			e.emit(Event{Type: "rate_limited", Message: fmt.Sprintf("%d agent calls in the last hour (--max-calls-per-hour): waiting until %s", n, wait.Format(time.RFC3339)),
				Data: map[string]any{"until": wait}})
		}
		if err := e.cfg.Clock.Sleep(ctx, wait.Sub(now)); err != nil {
			return err
		}
	}
}

func (e *Engine) resetBackoff() {
	e.backoffMu.Lock()
	e.backoff = 0
	e.backoffMu.Unlock()
}
