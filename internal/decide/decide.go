// Package decide holds the rules that have a say in an item's iterations
// besides the gates, one file each: a question to a person (ask.go), plan
// approval (plan.go), a review the item is held for (review.go), the
// council (council.go) and test-fix re-runs (testfix.go). Each is an engine.Decider: it may claim the role
// of an item's next iteration (Turn) and, in the iteration's decide step,
// say what becomes of its verdict (Decide): go on, hold the item, run it
// again, or fail it with findings. The engine records what they decide.
package decide

import (
	"path/filepath"
	"strings"

	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/roles"
	"github.com/ralph-loop/ralph/internal/usage"
)

// Options are the run's settings of the rules.
type Options struct {
	Paths engine.Paths
	Roles *roles.Set // the roles in force (nil: none)
	// PlanApproval: an item's first iteration writes a plan; AutoApprove
	// approves each plan as soon as it is written.
	PlanApproval bool
	AutoApprove  bool
	// Council is how many members vote on a critical item (0 =
	// DefaultCouncil).
	Council int
	// TestFix re-runs a claim whose test gate failed up to N times, as
	// TestFixRole ("" = DefaultTestFixRole).
	TestFix     int
	TestFixRole string
}

// defaultCouncil is --council's default.
const defaultCouncil = 3

// defaultTestFixRole is the role of --test-fix re-runs unless one is named.
const defaultTestFixRole = "debugger"

// Rules are the run's deciders in the order the engine asks them: an
// iteration that asked a person waits for the answer whatever else it
// did; a planning iteration is judged before anything else; a claim that passed
// its gates may be held for a role's review, then needs the council when
// its item is critical; a claim whose test gate failed may be run again.
func Rules(o Options) ([]engine.Decider, error) {
	if o.Council <= 0 {
		o.Council = defaultCouncil
	}
	if o.TestFixRole == "" {
		o.TestFixRole = defaultTestFixRole
	}
	if _, ok := o.Roles.Get(o.TestFixRole); o.TestFix > 0 && !ok {
		r := o.TestFixRole
		return nil, usage.Errorf("--test-fix re-runs the agent as the %s, and no role %s is in force (add roles/%s.md or .ralph/roles/%s.md, or name another role)", r, r, r, r)
	}
	return []engine.Decider{
		ask{},
		plan{On: o.PlanApproval, Auto: o.AutoApprove, Roles: o.Roles, Paths: o.Paths},
		review{Roles: o.Roles},
		council{Members: o.Council, Roles: o.Roles},
		testFix{Max: o.TestFix, Role: o.TestFixRole},
	}, nil
}

// next is a decider's "no word".
var next = engine.Decision{}

// event is an event of x's iteration.
func event(x engine.View, typ, msg string, data map[string]any) engine.Event {
	f := x.Facts()
	return engine.Event{Type: typ, Iteration: f.Iteration, Item: f.Item.ID, Attempt: f.Attempt, Message: msg, Data: data}
}

// rel is p relative to the repository's root, for messages.
func rel(p engine.Paths, path string) string {
	if r, err := filepath.Rel(p.Root, path); err == nil {
		return r
	}
	return path
}

// oneLine folds s into one line of at most n bytes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = s[:n] + " …"
	}
	return s
}
