package engine

import (
	"fmt"
	"time"
)

// Policy keeps the rules that judge items — the gates, the items' checks
// and flags, the roles' triggers and council rules — as the run started
// with them (internal/policy implements it; nil: no guard). The CLI has
// the files checked against the pinned policy before it reads them; the
// engine pins a new run's policy and has the files checked again after
// every agent run.
type Policy interface {
	// Open is called once the run's state is known: a new run pins the
	// policy in the files; a resume keeps the one pinned before (or pins
	// the files' under --reload-policy). It returns when the policy in
	// force was pinned: the run takes the environment (the files git
	// ignores) as it was then, too (State.EnvSince).
	Open(runID string, resumed bool) (time.Time, error)
	// Restore puts the pinned policy back where an agent changed it (the
	// main tree, and dir when it is another tree) and says what it found.
	Restore(dir string) []string
}

// restorePolicy has the policy files checked after an agent ran, before
// anything judges its work, and reports what the agent had changed.
func (e *Engine) restorePolicy(x *Iteration) {
	if e.cfg.Policy == nil {
		return
	}
	for _, msg := range e.cfg.Policy.Restore(x.Attempt.Dir) {
		e.emit(Event{Type: "tamper_detected", Iteration: x.Current.Iteration, Item: x.Item.ID, Message: fmt.Sprintf("%s: %s", x.Item.ID, msg)})
	}
}
