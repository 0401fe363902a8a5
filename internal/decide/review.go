package decide

import (
	"context"
	"fmt"

	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/roles"
	"github.com/ralph-loop/ralph/internal/usage"
)

// review holds an item whose claim passed its gates until the role a
// completion trigger names (roles.yaml, task_marked_ready_to_complete)
// approves it: the item's next iteration is that role's review, in the
// same tree. A review that asks for changes (the engine reads its
// REVIEW: verdict) sends the item back to a worker iteration that
// addresses them.
type review struct {
	Roles *roles.Set
}

// Turn claims the review a held item waits for, and the worker iteration
// after a review asked for changes.
func (r review) Turn(it *engine.Item, is engine.ItemState) (engine.Turn, bool, error) {
	switch {
	case is.Review != "":
		return engine.Turn{Role: is.Review, Why: "awaiting review: " + is.ReviewWhy}, true, nil
	case is.Revise:
		return engine.Turn{Why: "the last review asked for changes; this iteration addresses them"}, true, nil
	}
	return engine.Turn{}, false, nil
}

// Decide asks the completion triggers once a claim passed the gates: one
// that holds names the role that must approve before the item passes. An
// approval is what they ask for, so a role's approval is not held again.
// A story a person marked as shown by review (its review field) is held
// for that role when its claim lacks only evidence.
func (r review) Decide(ctx context.Context, x engine.View, v engine.Verdict) (engine.Decision, error) {
	f := x.Facts()
	if it := f.Item; !v.Passed && v.Unproven && it.Review != "" && x.Record().Role != it.Review {
		role := it.Review
		if _, ok := r.Roles.Get(role); !ok {
			return next, usage.Errorf("%s's review names the role %s, and no role %s is in force (add roles/%s.md or .ralph/roles/%s.md, or name another role)", it.ID, role, role, role, role)
		}
		return holdFor(x, v, role, "its evidence is the "+role+"'s approval, as the PRD says", "claimed done with no test as evidence"), nil
	}
	if !v.Passed || !r.Roles.HasCompletionGates() || f.RoleVerdict == roles.Approve || f.Item.Role != "" {
		return next, nil
	}
	t, err := r.Roles.Choose(x.RoleEnv(), true)
	if err != nil {
		return next, usage.Errorf("%v", err)
	}
	if t == nil {
		return next, nil
	}
	return holdFor(x, v, t.Role, x.Why(t), "claimed done and its gates passed"), nil
}

// holdFor holds the item until role approves it: why says what asked
// for the review, what what the item did.
func holdFor(x engine.View, v engine.Verdict, role, why, what string) engine.Decision {
	id := x.Facts().Item.ID
	return engine.Decision{Action: engine.Hold, Status: "ready for review",
		Progress: v.Summary + "; the " + role + " must approve",
		Result:   v.Summary + "; waiting for the " + role + "'s approval",
		Log:      fmt.Sprintf("%s %s; the %s must approve (%s)", id, what, role, why),
		Events: []engine.Event{event(x, "review_requested", fmt.Sprintf("%s %s; the %s must approve before it passes (%s)", id, what, role, why),
			map[string]any{"role": role, "trigger": why})},
		Record: func(is *engine.ItemState) { is.Review, is.ReviewWhy = role, why },
	}
}
