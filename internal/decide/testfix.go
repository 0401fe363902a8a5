package decide

import (
	"context"
	"fmt"
	"slices"

	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/gate"
)

// testFix is --test-fix: a claim whose gate named "test" failed gets the
// agent again, with the failing output, up to Max times within the same
// attempt, each re-run an iteration of its own as Role. After the last
// the attempt counts as failed.
type testFix struct {
	Max  int
	Role string
}

// Turn claims the re-run an item waits for.
func (f testFix) Turn(it *engine.Item, is engine.ItemState) (engine.Turn, bool, error) {
	if is.Fix == "" {
		return engine.Turn{}, false, nil
	}
	return engine.Turn{Role: is.Fix, Why: fmt.Sprintf("test-fix re-run %d/%d: the test gate failed (--test-fix)", is.Fixes, f.Max)}, true, nil
}

// Decide asks for a re-run when the claim itself stood (no rejection, a
// finished agent run, no tampering) and only its test gate failed it.
func (f testFix) Decide(ctx context.Context, x engine.View, v engine.Verdict) (engine.Decision, error) {
	it := x.Facts()
	if f.Max <= 0 || !v.Claimed || v.Passed || it.Rejected != "" || it.Result.Failed() || len(v.Tampered) > 0 ||
		!slices.ContainsFunc(v.Gates, func(g gate.Result) bool { return g.Name == "test" && !g.Passed }) {
		return next, nil
	}
	n := x.Record().Fixes + 1
	if n > f.Max {
		return next, nil
	}
	return engine.Decision{Action: engine.Rerun,
		Status: fmt.Sprintf("test failed; test-fix re-run %d/%d follows", n, f.Max),
		Result: fmt.Sprintf("test gate failed; test-fix re-run %d/%d follows: %s", n, f.Max, v.Summary),
		Log:    fmt.Sprintf("%s: the test gate failed; test-fix re-run %d/%d follows (no attempt spent)", it.Item.ID, n, f.Max),
		Events: []engine.Event{event(x, "test_fix", fmt.Sprintf("%s: the test gate failed; re-running the agent as %s with the failing output (test-fix re-run %d/%d within attempt %d/%d)", it.Item.ID, f.Role, n, f.Max, it.Attempt, x.MaxAttempts()),
			map[string]any{"role": f.Role, "rerun": n, "max": f.Max})},
		Record: func(is *engine.ItemState) { is.Fixes, is.Fix = n, f.Role },
	}, nil
}
