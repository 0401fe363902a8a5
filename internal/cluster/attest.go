package cluster

import (
	"sync"

	"github.com/ralph-loop/ralph/internal/judge"
)

// Attestations are the gate results workers report, by item: the latest
// report of each, with the tree of the commit the worker's gates ran on.
// The coordinator's judge asks them (judge.Attester): they stand only
// when the tree it judges is exactly that tree (but for ralph's own
// bookkeeping of the item) and the gates it asks for are the ones the
// worker ran; anything else — the work built onto other work that landed
// since, a file put back, other gates — runs the gates on the
// coordinator.
type Attestations struct {
	mu sync.Mutex
	by map[string]judge.Attestation // by item
}

// Put records a worker's report of item's gates.
func (a *Attestations) Put(item string, at judge.Attestation) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.by == nil {
		a.by = map[string]judge.Attestation{}
	}
	a.by[item] = at
}

// Drop forgets item's report (a new iteration of it started).
func (a *Attestations) Drop(item string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.by, item)
}

// Attested is item's latest report.
func (a *Attestations) Attested(item string) (judge.Attestation, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	at, ok := a.by[item]
	return at, ok
}
