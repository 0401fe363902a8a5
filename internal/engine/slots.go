package engine

import (
	"context"
	"sync"
)

// agentSlots bounds the agents running at once (Config.Parallel). A worker
// takes a slot when its item starts. When items work in trees of their own
// (a Stager that stages), the slot comes free as soon as the item's work is
// verified: committing it on its branch and waiting in the merge queue run
// no agent, and holding the slot meanwhile would leave a worker idle for
// every merge. A conflict resolver runs an agent, so it takes a slot again.
type agentSlots struct {
	sem   chan struct{}
	wake  chan struct{} // a slot came free or an item passed: look for work
	mu    sync.Mutex
	holds map[string]*slotHold
}

// slotHold is one item's slot; release is idempotent.
type slotHold struct {
	s    *agentSlots
	once sync.Once
	held bool
}

func newAgentSlots(n int) *agentSlots {
	if n < 1 {
		n = 1
	}
	return &agentSlots{sem: make(chan struct{}, n), wake: make(chan struct{}, 1), holds: map[string]*slotHold{}}
}

// free reports whether a slot is free now.
func (s *agentSlots) free() bool { return len(s.sem) < cap(s.sem) }

// tryTake takes a slot for id if one is free.
func (s *agentSlots) tryTake(id string) bool {
	select {
	case s.sem <- struct{}{}:
		s.mu.Lock()
		s.holds[id] = &slotHold{s: s, held: true}
		s.mu.Unlock()
		return true
	default:
		return false
	}
}

// done forgets id's hold, giving its slot back if it still has it.
func (s *agentSlots) done(id string) {
	s.mu.Lock()
	h := s.holds[id]
	delete(s.holds, id)
	s.mu.Unlock()
	if h != nil {
		h.release()
	}
}

// release gives id's slot back early (its agent work is over).
func (s *agentSlots) release(id string) {
	s.mu.Lock()
	h := s.holds[id]
	s.mu.Unlock()
	if h != nil {
		h.release()
	}
}

// retake waits for a slot for id again after an early release (a resolver
// about to run an agent). It returns a function that gives it back.
func (s *agentSlots) retake(ctx context.Context, id string) (func(), error) {
	s.mu.Lock()
	h := s.holds[id]
	s.mu.Unlock()
	if h == nil || h.holding() {
		return func() {}, nil // never released (or not scheduled): nothing to do
	}
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	var once sync.Once
	return func() { once.Do(s.give) }, nil
}

func (h *slotHold) holding() bool {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	return h.held
}

func (h *slotHold) release() {
	h.once.Do(func() {
		h.s.mu.Lock()
		h.held = false
		h.s.mu.Unlock()
		h.s.give()
	})
}

func (s *agentSlots) give() {
	<-s.sem
	s.poke()
}

// poke tells the scheduler to look for work now.
func (s *agentSlots) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}
